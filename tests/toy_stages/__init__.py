"""A toy pipeline for engine tests: count lines of text files, following `include` lines."""
