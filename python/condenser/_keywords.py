"""Keywords that sentence-transformers takes and condenser does not (yet): accepted at their
default value (nothing changes), refused with a TypeError naming them otherwise, so that no
setting is silently ignored; an unknown keyword is refused naming the nearest valid one."""
import difflib

_UNSET = object()


def check(func, given, supported, theirs):
    """Refuse the keywords of `given` (a dict) that `func` cannot honour.

    `supported`: the names func takes itself; `theirs`: {name: default} of sentence-transformers'
    keywords condenser does not support."""
    for key, value in given.items():
        if key in theirs:
            default = theirs[key]
            if value is default or (value == default and type(value) is type(default)):
                continue
            raise TypeError(
                f"{func}(): sentence-transformers' keyword {key}={value!r} is not supported by "
                f"condenser yet (only its default, {default!r}); see docs/python.md"
            )
        near = difflib.get_close_matches(key, list(supported) + list(theirs), n=1, cutoff=0.6)
        hint = f"; did you mean '{near[0]}'?" if near else ""
        raise TypeError(f"{func}() got an unexpected keyword argument '{key}'{hint}")


def dtype_of(func, model_kwargs):
    """condenser's compute type from sentence-transformers' model_kwargs (its torch_dtype or
    dtype; None: the device's default); any other key is refused."""
    dtype = None
    for key, value in (model_kwargs or {}).items():
        if key not in ("torch_dtype", "dtype"):
            raise TypeError(f"{func}(): model_kwargs[{key!r}] is not supported by condenser yet (only torch_dtype)")
        dtype = dtype_name(value)
    return dtype


def dtype_name(value):
    """A torch dtype (torch.bfloat16) or its name ("bfloat16", "bf16") as condenser's name."""
    name = str(value).rsplit(".", 1)[-1].lower()
    names = {"float32": "f32", "float": "f32", "fp32": "f32", "f32": "f32", "bfloat16": "bf16",
             "bf16": "bf16", "float16": "f16", "half": "f16", "fp16": "f16", "f16": "f16"}
    if name == "auto":
        return None
    if name not in names:
        raise ValueError(f"torch_dtype={value!r}: condenser computes in float32, bfloat16 or float16")
    return names[name]


def show(show_progress_bar):
    """sentence-transformers' show_progress_bar as condenser draws it: True, a bar (as the CLI:
    redrawn on a terminal, a line now and then in a log); False, none; None (the default), a bar
    on a terminal only, so a notebook's or a pipeline's log is not filled by every call."""
    if show_progress_bar is None:
        import sys
        return bool(getattr(sys.stderr, "isatty", lambda: False)())
    return bool(show_progress_bar)


def device_name(device):
    """sentence-transformers' device (None: the CPU here, condenser's default) as condenser's."""
    if device is None:
        return "cpu"
    return str(device)
