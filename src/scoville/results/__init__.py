"""Run schema, crash-safe run directories, manifests and the run catalog."""
