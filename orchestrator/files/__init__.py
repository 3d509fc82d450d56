"""Files: the project's (the file table, the scan, the stat pass, what of the project is read,
the reader units read through) and the output folder's (safe paths, atomic writes that follow no
link, the ledger `clean` uses, the output lock)."""
