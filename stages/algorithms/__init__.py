"""Algorithms the content libraries share: path globs (layout rules, `collect.exclude`),
strongly connected components (asset and bundle cycles) and the priority fill of bundles
(`shared_dependencies: priority`, which the layout and the Cocos source both use)."""
