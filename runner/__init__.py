"""tmlbench engine: tasks, sandboxes, agents, grading and run records."""

__version__ = "0.1.0"
