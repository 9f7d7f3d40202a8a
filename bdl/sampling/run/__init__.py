"""The loop and its program: a run's start, the compiled chunk, what it carries, the calls
that run it, where chains live, and a chain that fails inside it."""
