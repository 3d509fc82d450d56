"""Publishing: putting a build into its output folder safely (bundles, loose files, manifest)."""
