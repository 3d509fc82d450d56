"""The command-line shell: parse, call the engine, map errors to exit codes, print; running a
build as a command does (runs.py), the run record (runrecord.py), switches."""
