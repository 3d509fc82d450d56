"""Algorithms the content libraries share: path globs (layout rules, `collect.exclude`) and
strongly connected components (asset and bundle cycles)."""
