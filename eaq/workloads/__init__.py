"""What one measured pass is: a forward pass (the benchmark task's default) or generation (prefill, then decode)."""
