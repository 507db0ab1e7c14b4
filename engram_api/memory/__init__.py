"""The memory engine: model, policy, guards and the service operations."""
