"""Hooks into other libraries, registered through their extension points, never global patches.

* :mod:`fastpath.integrations.transformers`: a ``"fastpath"`` experts implementation for
  Hugging Face transformers' ``ExpertsInterface`` (``experts_implementation="fastpath"``).

Nothing here is imported by ``import fastpath``: the libraries hooked into stay optional.
"""
