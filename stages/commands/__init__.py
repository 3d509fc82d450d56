"""The `orchestrate` commands about content (registered under `orchestrate.commands`): generating
projects, querying the cook list, checking rules, looking inside bundles."""
