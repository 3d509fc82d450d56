"""Custom code (`func_str`): run in worker processes that are killed at `rules.timeout`.

`host.py` is the side that validates (the driver, a Ray worker): a pool of long-lived worker
processes and the requests it sends them. `worker.py` is the worker process's loop. `crossing.py`
decides what crosses between them: plain data, and extracted elements as copies.
`containment.py` holds a worker in: its session, environment, working folder and `rules.limits`.
"""
