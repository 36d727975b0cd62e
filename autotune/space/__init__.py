"""Search spaces: parameters, constraints, the YAML loader, enumeration and the space hash."""

from autotune.space.space import Space, default_space_dirs, format_count, load_space, load_space_dict

__all__ = ["Space", "default_space_dirs", "format_count", "load_space", "load_space_dict"]
