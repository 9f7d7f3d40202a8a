"""Small pytree and array helpers shared across bdl."""
