"""`torch.nn.Module` and its containers (`Sequential`, `ModuleList`, `ModuleDict`), with PyTorch's semantics.

A module's attributes register themselves by kind, as in PyTorch: a
`Parameter` goes to its parameters, a `Module` to its submodules, a tensor
given to `register_buffer` to its buffers; everything else is a plain
attribute. Traversals (`named_parameters`, `named_modules`, `state_dict`, …)
walk the submodules in the order they were assigned, with PyTorch's dotted
names. Moving a module (`to`, `cuda`, `half`) moves each parameter and
buffer and keeps the objects, so an optimizer made before the move still
holds them.
"""

from __future__ import annotations

from collections import OrderedDict, namedtuple

from kernbench.dtypes import DType, resolve_dtype
from kernbench.runtime_api import autograd
from kernbench.runtime_api.autograd import RemovableHandle
from kernbench.runtime_api.errors import ModuleError
from kernbench.runtime_api.nn.parameter import Parameter
from kernbench.runtime_api.tensor.core import Tensor

IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])
_REGISTRIES = ("_parameters", "_buffers", "_modules")


# Hooks run around every module's forward (PyTorch's `register_module_forward_pre_hook` and
# `register_module_forward_hook`): what debugging tools that trace modules (CommDebugMode) register.
_GLOBAL_FORWARD_PRE_HOOKS: dict = {}
_GLOBAL_FORWARD_HOOKS: dict = {}


def register_module_forward_pre_hook(hook) -> RemovableHandle:
    """`hook(module, args)` before every module's forward, before its own pre-hooks (its result is ignored)."""
    handle = RemovableHandle(_GLOBAL_FORWARD_PRE_HOOKS)
    _GLOBAL_FORWARD_PRE_HOOKS[handle.id] = hook
    return handle


def register_module_forward_hook(hook) -> RemovableHandle:
    """`hook(module, args, output)` after every module's forward and its own hooks (its result is ignored)."""
    handle = RemovableHandle(_GLOBAL_FORWARD_HOOKS)
    _GLOBAL_FORWARD_HOOKS[handle.id] = hook
    return handle


class Module:
    """Base class of every neural network module (`torch.nn.Module`): subclasses call `super().__init__()`, assign
    parameters and submodules as attributes, and define `forward`; calling the module runs its hooks and
    `forward`."""

    training: bool

    def __init__(self, *args, **kwargs) -> None:
        if args or kwargs:
            raise ModuleError(f"{type(self).__name__}.__init__() got unexpected arguments {args or ''}"
                              f"{kwargs or ''}")
        for name, value in (("training", True), ("_parameters", {}), ("_buffers", {}),
                            ("_non_persistent_buffers", set()), ("_modules", {}), ("_forward_hooks", {}),
                            ("_forward_pre_hooks", {}), ("_forward_pre_hooks_with_kwargs", set())):
            object.__setattr__(self, name, value)

    # ---- calling ---------------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        """What the module computes; every subclass defines it."""
        raise ModuleError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        for hook in list(_GLOBAL_FORWARD_PRE_HOOKS.values()):
            hook(self, args)
        for key, hook in list(self._forward_pre_hooks.items()):
            if key in self._forward_pre_hooks_with_kwargs:
                changed = hook(self, args, kwargs)
                if changed is not None:
                    if not (isinstance(changed, tuple) and len(changed) == 2):
                        raise ModuleError("forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                                          f"but got {changed}.")
                    args, kwargs = changed
                continue
            changed = hook(self, args)
            if changed is not None:
                args = changed if isinstance(changed, tuple) else (changed,)
        result = self.forward(*args, **kwargs)
        for hook in list(self._forward_hooks.values()):
            changed = hook(self, args, result)
            if changed is not None:
                result = changed
        for hook in list(_GLOBAL_FORWARD_HOOKS.values()):
            hook(self, args, result)
        return result

    def register_forward_pre_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False) -> RemovableHandle:
        """`hook(module, args)` before each forward; a value it returns replaces the arguments. With
        `with_kwargs`, `hook(module, args, kwargs)`, returning None or `(args, kwargs)`."""
        handle = self._hooked(self._forward_pre_hooks, hook, prepend)
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs.add(handle.id)
        return handle

    def register_forward_hook(self, hook, *, prepend: bool = False) -> RemovableHandle:
        """`hook(module, args, output)` after each forward; a value it returns replaces the output."""
        return self._hooked(self._forward_hooks, hook, prepend)

    def _hooked(self, hooks: dict, hook, prepend: bool) -> RemovableHandle:
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        if prepend:
            for key in [key for key in hooks if key != handle.id]:
                hooks[key] = hooks.pop(key)
        return handle

    # ---- registration ----------------------------------------------------------------------
    def __setattr__(self, name: str, value) -> None:
        registries = self.__dict__.get("_parameters")
        if registries is None and isinstance(value, (Parameter, Module)):
            kind = "parameter" if isinstance(value, Parameter) else "module"
            raise ModuleError(f"cannot assign {kind} before Module.__init__() call")
        if isinstance(value, (Parameter, Module)):
            registry = self._parameters if isinstance(value, Parameter) else self._modules
            if name not in registry:  # a name already there keeps its place, as in PyTorch
                self._forget(name)
            registry[name] = value
        elif registries is not None and name in self._parameters:
            if value is not None:
                raise ModuleError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                  "(torch.nn.Parameter or None expected)")
            self._parameters[name] = None
        elif registries is not None and name in self._modules:
            if value is not None:
                raise ModuleError(f"cannot assign '{type(value).__name__}' as child module '{name}' "
                                  "(torch.nn.Module or None expected)")
            self._modules[name] = None
        elif registries is not None and name in self._buffers:
            if value is not None and not isinstance(value, Tensor):
                raise ModuleError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                  "(torch.Tensor or None expected)")
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str):
        for registry in _REGISTRIES:
            found = self.__dict__.get(registry)
            if found is not None and name in found:
                return found[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        if not self._forget(name):
            object.__delattr__(self, name)

    def _forget(self, name: str) -> bool:
        """Drop `name` from every registry and the plain attributes; whether it was in a registry."""
        found = False
        for registry in _REGISTRIES:
            entries = self.__dict__[registry]
            found = name in entries or found
            entries.pop(name, None)
        self._non_persistent_buffers.discard(name)
        self.__dict__.pop(name, None)
        return found

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add `param` (or None) as the parameter `name`."""
        self._register("_parameters", name, param, Parameter,
                       f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                       "(torch.nn.Parameter or None required)")

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add `tensor` as the buffer `name`: moved with the module, in its state dict when `persistent`."""
        self._register("_buffers", name, tensor, Tensor, f"cannot assign '{type(tensor).__name__}' object to buffer "
                                                         f"'{name}' (torch Tensor or None required)")
        if not persistent:
            self._non_persistent_buffers.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Add `module` (or None) as the submodule `name`."""
        self._register("_modules", name, module, Module, f"{type(module).__name__} is not a Module subclass")

    def _register(self, registry: str, name: str, value, kind: type, refusal: str) -> None:
        """`value` (None, or a `kind`) under `name` in `registry`, and nowhere else; `refusal` for anything else."""
        if value is not None and not isinstance(value, kind):
            raise ModuleError(refusal)
        if "_parameters" not in self.__dict__:
            raise ModuleError(f"cannot assign {registry[1:-1]} before Module.__init__() call")
        if not isinstance(name, str) or not name or "." in name:
            raise ModuleError(f'{registry[1:-1]} name can\'t contain "." and can\'t be empty, got {name!r}')
        if name not in self.__dict__[registry]:  # a name already there keeps its place, as in PyTorch
            self._forget(name)
        self.__dict__[registry][name] = value

    register_module = add_module

    def get_submodule(self, target: str) -> Module:
        """The submodule at the dotted path `target` ('' is this module)."""
        module = self
        for part in target.split(".") if target else ():
            if part not in module._modules:
                raise ModuleError(f"{type(module).__name__} has no attribute `{part}`")
            module = module._modules[part]
        return module

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at the dotted path `target`."""
        path, _, name = target.rpartition(".")
        module = self.get_submodule(path)
        if name not in module._parameters:
            raise ModuleError(f"{type(module).__name__} has no parameter `{name}`")
        return module._parameters[name]

    # ---- traversal -------------------------------------------------------------------------
    def named_modules(self, memo: set | None = None, prefix: str = "", remove_duplicate: bool = True):
        """(dotted name, module) of this module and every submodule, depth first, each once."""
        memo = set() if memo is None else memo
        if remove_duplicate and self in memo:
            return
        if remove_duplicate:
            memo.add(self)
        yield prefix, self
        for name, module in self._modules.items():
            if module is not None:
                yield from module.named_modules(memo, f"{prefix}.{name}" if prefix else name, remove_duplicate)

    def modules(self):
        for _, module in self.named_modules():
            yield module

    def named_children(self):
        """(name, module) of the direct submodules, each once."""
        seen = set()
        for name, module in self._modules.items():
            if module is not None and module not in seen:
                seen.add(module)
                yield name, module

    def children(self):
        for _, module in self.named_children():
            yield module

    def _named_members(self, registry: str, prefix: str, recurse: bool, remove_duplicate: bool = True):
        seen = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for name, value in module.__dict__[registry].items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                seen.add(id(value))
                yield (f"{module_prefix}.{name}" if module_prefix else name), value

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        """(dotted name, parameter) of this module's and (recurse) its submodules' parameters, each once."""
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True):
        for _, parameter in self.named_parameters(recurse=recurse):
            yield parameter

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True):
        for _, buffer in self.named_buffers(recurse=recurse):
            yield buffer

    def apply(self, fn):
        """`fn(module)` on every submodule (children first), then on this module; returns this module."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # ---- state -----------------------------------------------------------------------------
    def state_dict(self, *args, destination=None, prefix: str = "", keep_vars: bool = False):
        """An ordered dict of every parameter and persistent buffer by dotted name (detached unless keep_vars)."""
        out = OrderedDict() if destination is None else destination
        for module_prefix, module in self.named_modules(prefix=prefix.rstrip("."), remove_duplicate=False):
            lead = f"{module_prefix}." if module_prefix else ""
            for name, value in module._parameters.items():
                if value is not None:
                    out[lead + name] = value if keep_vars else value.detach()
            for name, value in module._buffers.items():
                if value is not None and name not in module._non_persistent_buffers:
                    out[lead + name] = value if keep_vars else value.detach()
        return out

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Copy each entry of `state_dict` into the parameter or buffer of that name (device work, no autograd);
        with `strict`, missing or unexpected keys are an error. Returns (missing_keys, unexpected_keys)."""
        own = self.state_dict(keep_vars=True)
        missing = [key for key in own if key not in state_dict]
        unexpected = [key for key in state_dict if key not in own]
        for key, target in own.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            if tuple(value.shape) != tuple(target.shape):
                raise ModuleError(f"Error(s) in loading state_dict for {type(self).__name__}: size mismatch for "
                                  f"{key}: copying a param with shape {tuple(value.shape)} from checkpoint, the shape "
                                  f"in current model is {tuple(target.shape)}.")
            target.detach().copy_(value, non_blocking=True)
        if strict and (missing or unexpected):
            said = [f"{what} key(s) in state_dict: {', '.join(repr(k) for k in keys)}."
                    for what, keys in (("Missing", missing), ("Unexpected", unexpected)) if keys]
            raise ModuleError(f"Error(s) in loading state_dict for {type(self).__name__}: {' '.join(said)}")
        return IncompatibleKeys(missing, unexpected)

    def train(self, mode: bool = True):
        """Training mode on (or off) for this module and every submodule; returns this module."""
        if not isinstance(mode, bool):
            raise ModuleError("training mode is expected to be boolean")
        for module in self.modules():
            object.__setattr__(module, "training", mode)
        return self

    def eval(self):
        """Evaluation mode: `train(False)`."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True):
        for parameter in self.parameters():
            parameter.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Every parameter's gradient dropped (`set_to_none`) or filled with zeros."""
        autograd.zero_grads(self.parameters(), set_to_none)

    # ---- moving ----------------------------------------------------------------------------
    def to(self, *args, **kwargs):
        """Every parameter and buffer on `device` and, floating and complex ones, in `dtype` (`to(device)`,
        `to(dtype)`, `to(tensor)`, `to(device, dtype)`), as PyTorch's: a complex buffer cast to a real dtype keeps
        its real part. The objects are kept. Returns this module."""
        return self._apply(lambda t: t.to(*args, **kwargs) if t.dtype.is_differentiable
                           else t.to(*_devices_only(args), **{k: v for k, v in kwargs.items() if k == "device"}))

    def cuda(self, device=None):
        return self._apply(lambda t: t.cuda(device))

    def cpu(self):
        return self._apply(lambda t: t.to("cpu"))

    def type(self, dst_type):
        """Every floating parameter and buffer in `dst_type`."""
        dtype = resolve_dtype(dst_type)
        return self._apply(lambda t: t.to(dtype) if t.dtype.is_floating_point else t)

    def float(self):
        return self.type("f32")

    def half(self):
        return self.type("f16")

    def bfloat16(self):
        return self.type("bf16")

    def double(self):
        return self.type("f64")

    def _apply(self, fn):
        for module in self.modules():
            for registry in ("_parameters", "_buffers"):
                for value in module.__dict__[registry].values():
                    if value is not None:
                        _move(value, fn)
        return self

    # ---- text ------------------------------------------------------------------------------
    def extra_repr(self) -> str:
        """The text inside this module's parentheses in its repr (its settings)."""
        return ""

    def __repr__(self) -> str:
        lines = [f"({name}): " + repr(module).replace("\n", "\n  ") for name, module in self._modules.items()]
        extra = self.extra_repr()
        if not lines:
            return f"{type(self).__name__}({extra})"
        body = "\n  ".join(([extra] if extra else []) + lines)
        return f"{type(self).__name__}(\n  {body}\n)"

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules))


def _devices_only(args: tuple) -> tuple:
    """`Module.to`'s positional arguments that name a device (a buffer of integers keeps its dtype)."""
    return tuple(a.device if isinstance(a, Tensor) else a for a in args if not _names_a_dtype(a))[:1]


def _names_a_dtype(value) -> bool:
    if isinstance(value, DType):
        return True
    try:
        resolve_dtype(value)
    except Exception:
        return False
    return isinstance(value, str)


def _move(tensor: Tensor, fn) -> None:
    """`tensor` now holds `fn(tensor)`'s storage, dtype and device (and its gradient moved alike); same object."""
    moved = fn(tensor.detach())
    if moved.device == tensor.device and moved.dtype is tensor.dtype and moved._allocation is tensor._allocation \
            and moved._host_storage is tensor._host_storage:
        return
    tensor.dtype, tensor.device = moved.dtype, moved.device
    tensor.data = moved
    if tensor.grad is not None:
        tensor.grad = fn(tensor.grad)


class _ModuleSequence(Module):
    """What `Sequential` and `ModuleList` share: submodules named by their position."""

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module: Module):
        self.add_module(str(len(self)), module)
        return self


class Sequential(_ModuleSequence):
    """Modules run one after the other, each on the output of the one before (`Sequential(a, b)` or from an
    ordered dict of named modules)."""

    def __init__(self, *modules) -> None:
        super().__init__()
        named = modules[0].items() if len(modules) == 1 and isinstance(modules[0], OrderedDict) else \
            ((str(i), module) for i, module in enumerate(modules))
        for name, module in named:
            self.add_module(name, module)

    def forward(self, input):
        for module in self._modules.values():
            input = module(input)
        return input

    def __getitem__(self, index):
        if isinstance(index, slice):
            return Sequential(OrderedDict(list(self._modules.items())[index]))
        return list(self._modules.values())[index]


class ModuleList(_ModuleSequence):
    """A list of modules, each registered (named by its index) so its parameters are the list's."""

    def __init__(self, modules=None) -> None:
        super().__init__()
        self.extend(modules or ())

    def _renumbered(self, change) -> None:
        """The list after `change(modules)` (an edit of a Python list of them), renamed by position."""
        modules = list(self._modules.values())
        change(modules)
        self._modules.clear()
        self.extend(modules)

    def __getitem__(self, index):
        modules = list(self._modules.values())
        return ModuleList(modules[index]) if isinstance(index, slice) else modules[index]

    def __setitem__(self, index: int, module: Module) -> None:
        self._renumbered(lambda modules: modules.__setitem__(index, module))

    def __delitem__(self, index) -> None:
        self._renumbered(lambda modules: modules.__delitem__(index))

    def __iadd__(self, modules):
        return self.extend(modules)

    def extend(self, modules):
        for module in modules:
            self.append(module)
        return self

    def insert(self, index: int, module: Module) -> None:
        self._renumbered(lambda modules: modules.insert(index, module))


class ModuleDict(Module):
    """A dict of modules by name, each registered so its parameters are the dict's."""

    def __init__(self, modules=None) -> None:
        super().__init__()
        self.update(modules or {})

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def pop(self, key: str) -> Module:
        return self._modules.pop(key)

    def update(self, modules) -> None:
        for key, module in (modules.items() if hasattr(modules, "items") else modules):
            self[key] = module
