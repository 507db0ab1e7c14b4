"""The Engram Kubernetes operator (kopf).

It folds every ``EngramAgent`` into the permission ConfigMap the MCP service reads, keeps each
agent's token Secret, and runs one CronJob per ``EngramMaintenance`` whose finished runs it copies
into the resource's status. Handlers only register; builders are pure; reconcilers do the I/O.
"""
