"""Runs as the console handles them: starting, queueing and stopping (`jobs`), their status lines,
the cluster choice, this machine's devices, downloads (`exports`) and serving."""
