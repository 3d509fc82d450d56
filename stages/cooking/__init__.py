"""Cooking: the built-in and external cookers that turn an asset's files into its payload."""
