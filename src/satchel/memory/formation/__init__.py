"""Formation: the worker that turns stored turns into facts, segments and passages."""
