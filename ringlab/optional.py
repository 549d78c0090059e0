"""The one guard for ringlab's optional torch dependency.

Modules that need torch call :func:`require_torch` inside the functions that use it, so that
``import ringlab`` (and importing those modules) never loads torch; without torch the caller gets
an ImportError naming what needed it and the extra to install. Imports nothing of ringlab.
"""

from __future__ import annotations


def require_torch(needed_by: str) -> tuple:
    """``(torch, torch.distributed)``; ImportError ``"<needed_by> needs torch: pip install 'ringlab[torch]'"``
    when torch is not installed. ``needed_by`` names the module or feature for that message."""
    try:
        import torch
        import torch.distributed as dist
    except ImportError as exc:  # pragma: no cover - exercised only without torch
        raise ImportError(f"{needed_by} needs torch: pip install 'ringlab[torch]'") from exc
    return torch, dist
