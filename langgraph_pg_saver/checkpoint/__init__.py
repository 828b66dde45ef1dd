"""The checkpointer: the savers, what they share, keys, parameters and rows, metadata, the
lifecycle (prune, copy, retention, delete-for-runs, reencrypt) and the import from the official saver."""
