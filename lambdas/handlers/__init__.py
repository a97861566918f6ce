"""Thin Lambda handlers: parse the event, call one domain function, return a model.

Importing this package starts a function's init phase, which allocates a great deal (every model class, the SDK's
modules) and frees almost nothing: the cyclic garbage collector's passes over it are pure cost (about a tenth of a
function's cold import). So the collector is paused here, and each handler module (a function's `Handler`) ends with
`init_complete()`, which freezes what init made (`gc.freeze`: no later collection walks it again, and the first one
after init does not walk all of it at once) and resumes the collector.
`tests/infrastructure/test_handlers_init.py` imports every function's handler module alone and checks that it does.

Two more things init no longer pays for: Powertools' aggregate packages import only the names a function uses
(`handlers.lean_imports`), and pydantic does not scan every installed distribution's entry points for a plugin at
its first model build (Longhaul installs none: `PYDANTIC_DISABLE_PLUGINS`, unless the function's environment says
otherwise).
"""

import gc
import os

from handlers.lean_imports import defer_aggregate_packages

gc.disable()
defer_aggregate_packages()
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


def init_complete() -> None:
    """The end of a handler module's import: what init made is frozen, and the collector resumes."""
    gc.freeze()
    gc.enable()
