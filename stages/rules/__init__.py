"""The ArtEase-compatible rule engine (spec/rules.md): loading, the path language, conditions,
predefined sets and functions, built-in checks, the per-file engine and the reports."""
