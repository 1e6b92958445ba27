"""The KV workspace's bookkeeping, torch-free: the bounded pool of visual KV blocks and the
sequences that hold them. The runtime schedules with it and the step reads it, so it sits
below both."""
