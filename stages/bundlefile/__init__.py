"""The bundle file format (docs/bundle-format.md): writing, compressing, reading, inspecting."""
