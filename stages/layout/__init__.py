"""The bundle layout: which bundle holds each cooked asset, by layout rules and path globs."""
