"""The contract shared by the Engram service and its operator.

Both sides import only this package from each other's world: the permission-config document
the operator writes and the service reads, and the scope grammar both must agree on.
"""
