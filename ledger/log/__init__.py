"""The table log: entries, replay, checkpoints and the commit loop."""
