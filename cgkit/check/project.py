"""The project: the checked files, the files they import, and an index of each.

Files are parsed once. The index of a file is shallow (imports, top-level functions, classes and
their methods); everything deeper is computed on demand for the functions a region reaches.
"""

from __future__ import annotations

import ast
import os

from cgkit.check.names import add_import, canonical, dotted
from cgkit.check.sources import Source

_NESTED_BLOCKS = (ast.If, ast.Try, ast.With, ast.AsyncWith, ast.For, ast.While, ast.AsyncFor)
if hasattr(ast, "TryStar"):
    _NESTED_BLOCKS = (*_NESTED_BLOCKS, ast.TryStar)
FUNC_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef)
_LIBRARY_ROOTS = frozenset(("torch", "numpy", "os", "sys", "typing", "collections", "builtins", "logging", "math"))


def _block_bodies(stmt):
    for name in ("body", "orelse", "finalbody"):
        body = getattr(stmt, name, None)
        if body:
            yield body
    for handler in getattr(stmt, "handlers", ()) or ():
        yield handler.body


class FuncRef:
    """A function (or a module's top-level code) that analysis can enter."""

    __slots__ = ("module", "node", "cls", "name")

    def __init__(self, module: ModuleIndex, node, cls: ClassIndex | None, name: str):
        self.module = module
        self.node = node
        self.cls = cls
        self.name = name

    @property
    def key(self) -> int:
        return id(self.node)

    @property
    def display(self) -> str:
        if type(self.node) is ast.Module:
            return "<module>"
        return f"{self.cls.name}.{self.name}()" if self.cls else f"{self.name}()"

    @property
    def line(self) -> int:
        return getattr(self.node, "lineno", 1)

    @property
    def positional_params(self) -> list[str]:
        """Names of the parameters a positional argument can fill (without self/cls of a method)."""
        node = self.node
        if type(node) is ast.Module:
            return []
        names = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
        is_static = any(getattr(d, "id", None) == "staticmethod" for d in node.decorator_list)
        if self.cls is not None and names and not is_static:
            names = names[1:]
        return names

    @property
    def required_params(self) -> list[str]:
        """The positional parameters without a default (those every call must fill)."""
        node = self.node
        names = self.positional_params
        if type(node) is ast.Module or not node.args.defaults:
            return names
        return names[: len(names) - len(node.args.defaults)] if len(node.args.defaults) < len(names) else []


class ClassIndex:
    def __init__(self, module: ModuleIndex, node: ast.ClassDef):
        self.module = module
        self.node = node
        self.name = node.name
        self.methods: dict[str, ast.FunctionDef] = {}
        stack = [node.body]
        while stack:
            for stmt in stack.pop():
                if type(stmt) in FUNC_TYPES:
                    self.methods.setdefault(stmt.name, stmt)
                elif isinstance(stmt, _NESTED_BLOCKS):
                    stack.extend(_block_bodies(stmt))
        self._bases: list | None = None
        self._attrs = None

    def field(self, attr: str) -> ast.expr | None:
        """The value the class body gives ``attr`` (a dataclass field, ``lr: float = 1e-3``), or None."""
        for stmt in self.node.body:
            target = stmt.target if type(stmt) is ast.AnnAssign else stmt.targets[0] if type(stmt) is ast.Assign else None
            if type(target) is ast.Name and target.id == attr and stmt.value is not None:
                return stmt.value
        return None

    def method_ref(self, name: str) -> FuncRef | None:
        node = self.methods.get(name)
        return FuncRef(self.module, node, self, name) if node is not None else None

    def bases(self, project: Project) -> list:
        """Resolved bases: ClassIndex for project classes, qualified-name strings otherwise."""
        if self._bases is None:
            self._bases = []
            for base in self.node.bases:
                target = self.module.resolve_expr(base, project)
                if target is not None:
                    self._bases.append(target)
        return self._bases

    def mro(self, project: Project, _depth: int = 0):
        yield self
        if _depth > 20:
            return
        for base in self.bases(project):
            if isinstance(base, ClassIndex) and base is not self:
                yield from base.mro(project, _depth + 1)

    def find_method(self, name: str, project: Project) -> FuncRef | None:
        for cls in self.mro(project):
            node = cls.methods.get(name)
            if node is not None:
                return FuncRef(cls.module, node, cls, name)
        return None

    def is_module(self, project: Project) -> bool:
        for cls in self.mro(project):
            for base in cls.bases(project):
                if isinstance(base, str) and (base.startswith("torch.nn.") or base.startswith("transformer_engine.")):
                    return True
        return False

    def is_optimizer(self, project: Project) -> bool:
        """A ``torch.optim.Optimizer`` subclass of the project (LARS, LAMB, SAM written in the script)."""
        return any(base.startswith("torch.optim.") for cls in self.mro(project) for base in cls.bases(project)
                   if isinstance(base, str))

    def is_autograd_function(self, project: Project) -> bool:
        """A ``torch.autograd.Function``: ``Cls.apply(...)`` runs its ``forward``."""
        return any(base == "torch.autograd.Function" or base == "torch.autograd.function.Function"
                   for cls in self.mro(project) for base in cls.bases(project) if isinstance(base, str))



class ModuleIndex:
    def __init__(self, source: Source, tree: ast.Module, modname: str, is_package: bool, checked: bool):
        self.source = source
        self.path = source.path
        self.text = source.text
        self.tree = tree
        self.modname = modname
        self.is_package = is_package
        self.checked = checked
        self.imports: dict[str, str] = {}
        self.defs: dict[str, ast.FunctionDef] = {}
        self.classes: dict[str, ClassIndex] = {}
        self._lines: list[str] | None = None
        self._mutable_globals: dict[str, int] | None = None
        self.number_options: frozenset[str] | None = None  # command-line options parsed as numbers (around.py)
        self.registries: dict | None = None  # its module-level dispatch tables (calls.py)
        stack = [tree.body]
        while stack:
            for stmt in stack.pop():
                t = type(stmt)
                if t is ast.Import or t is ast.ImportFrom:
                    add_import(stmt, modname, is_package, self.imports)
                elif t in FUNC_TYPES:
                    self.defs[stmt.name] = stmt
                elif t is ast.ClassDef:
                    self.classes[stmt.name] = ClassIndex(self, stmt)
                elif isinstance(stmt, _NESTED_BLOCKS):
                    stack.extend(_block_bodies(stmt))
        self.body_ref = FuncRef(self, tree, None, "<module>")

    @property
    def lines(self) -> list[str]:
        if self._lines is None:
            self._lines = self.text.split("\n")
        return self._lines

    def qual(self, node: ast.expr, local_imports: dict[str, str] | None = None) -> str | None:
        """Qualified name of a dotted expression, or None (a local variable, a call result...)."""
        parts = dotted(node)
        if parts is None:
            return None
        head = parts[0]
        base = None
        if local_imports:
            base = local_imports.get(head)
        if base is None:
            base = self.imports.get(head)
        if base is None:
            if head in self.defs or head in self.classes:
                base = f"{self.modname}.{head}" if self.modname else head
            else:
                return None
        if len(parts) > 1:
            return canonical(base + "." + ".".join(parts[1:]))
        return canonical(base)

    def resolve_expr(self, node: ast.expr, project: Project, local_imports=None):
        """A name in this module -> ClassIndex / FuncRef for project code, else its qualified name."""
        parts = dotted(node)
        if parts is None:
            return None
        if len(parts) == 1 and not (local_imports and parts[0] in local_imports):
            name = parts[0]
            if name in self.classes:
                return self.classes[name]
            if name in self.defs:
                return FuncRef(self, self.defs[name], None, name)
            alias = self._alias_of(name)
            if alias is not None:  # ``_eager_denoise = denoise`` at the top level
                return FuncRef(self, self.defs[alias], None, alias)
        qual = self.qual(node, local_imports)
        if qual is None:
            return None
        target = project.lookup(qual)
        return target if target is not None else qual


    def _alias_of(self, name: str) -> str | None:
        """The module's function a top-level ``name = func`` binds ``name`` to (its only binding)."""
        values = [stmt.value for stmt in self.tree.body if type(stmt) is ast.Assign
                  and any(type(t) is ast.Name and t.id == name for t in stmt.targets)]
        if len(values) == 1 and type(values[0]) is ast.Name and values[0].id in self.defs:
            return values[0].id
        return None


class Project:
    def __init__(self):
        self.modules: dict[str, ModuleIndex] = {}  # by module name
        self.by_path: dict[str, ModuleIndex] = {}
        self.checked: list[ModuleIndex] = []
        self.roots: list[str] = []  # import roots (where top-level packages/modules live)
        self.allowed: list[str] = []  # files outside the checked set may be loaded from here
        self._missing: set[str] = set()
        self.facts_cache: dict[int, object] = {}
        self.param_seeds: dict[int, dict[str, object]] = {}
        # Functions defined inside a method that read the method's ``self`` (``def run_once(): self.model(x)``):
        # id of the inner function -> the name of ``self`` it closes over.
        self.closure_self: dict[int, str] = {}
        self._roots: tuple[int, set[str]] | None = None
        # Called with a constructor (FuncRef of __init__) before its facts are read for the class's
        # attributes: the engine sets it to seed the parameters from the constructor's call sites.
        self.before_constructor = None
        self.loader = None  # callable(path) -> ModuleIndex | None (set by the engine)
        self._overrides: dict[tuple[int, str], list] = {}
        self.call_site_cache: dict[str, list] = {}  # name -> its call sites (cgkit.check.callers)

    def overrides(self, cls: ClassIndex, name: str) -> list[FuncRef]:
        """The methods ``name`` of the subclasses of ``cls`` that its own file defines (a runner base class
        and the runners built on it): what ``self.name()`` in ``cls`` runs for an instance of one of them.
        Subclasses in other files (a library's many implementations of an interface) are left out: which
        one runs is the caller's choice, not this code's."""
        key = (id(cls), name)
        if key not in self._overrides:
            self._overrides[key] = [
                FuncRef(sub.module, sub.methods[name], sub, name)
                for sub in cls.module.classes.values()
                if sub is not cls and name in sub.methods and cls in sub.mro(self)]
        return self._overrides[key]

    # -- module naming -------------------------------------------------------------------------
    @staticmethod
    def module_name(path: str) -> tuple[str, bool, str]:
        """(dotted module name, is package, import root) of a file, from the __init__.py above it."""
        path = os.path.abspath(path)
        directory, filename = os.path.split(path)
        stem = filename.rsplit(".", 1)[0]
        is_package = stem == "__init__"
        parts = [] if is_package else [stem]
        while os.path.isfile(os.path.join(directory, "__init__.py")):
            directory, pkg = os.path.split(directory)
            parts.append(pkg)
            if not pkg:
                break
        parts.reverse()
        name = ".".join(parts)
        return name, is_package, directory

    def add(self, mod: ModuleIndex, root: str) -> None:
        self.by_path[os.path.abspath(mod.path)] = mod
        if mod.modname:
            self.modules.setdefault(mod.modname, mod)
        if root not in self.roots:
            self.roots.append(root)

    # -- what the analysis keeps per function (cgkit.check.facts computes it) ---------------------
    def release(self) -> None:
        """Untie the index when a check is done. Modules, their functions and classes, and the facts of
        the functions point at each other; cut those ties and the syntax trees (millions of objects on
        a large tree) are freed by reference counting at once, instead of waiting for the cyclic
        garbage collector, which walks all of them (measured: 14 s on the standard library)."""
        for module in self.by_path.values():
            module.body_ref = None
            module.classes.clear()
        self.modules.clear()
        self.by_path.clear()
        self.checked.clear()
        self.facts_cache.clear()
        self.param_seeds.clear()
        self.closure_self.clear()
        self._overrides.clear()
        self.call_site_cache.clear()
        self.loader = None
        self.before_constructor = None

    def local_def(self, facts, name: str) -> FuncRef:
        """A function defined inside the function of ``facts``; one defined in a method keeps its class,
        and reads the method's ``self`` as the method does."""
        node = facts.local_defs[name]
        inner_params = {a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)}
        if facts.cls is not None and facts.self_name and facts.self_name not in inner_params:
            self.closure_self[id(node)] = facts.self_name
            return FuncRef(facts.module, node, facts.cls, name)
        return FuncRef(facts.module, node, None, name)

    def seed(self, fref: FuncRef, kinds: dict) -> None:
        """Argument kinds known at a call site, for a function not analysed yet."""
        if fref.key in self.facts_cache or not kinds:
            return
        seeds = self.param_seeds.setdefault(fref.key, {})
        for name, kind in kinds.items():
            seeds.setdefault(name, kind)

    # -- lookups -------------------------------------------------------------------------------
    def module(self, modname: str) -> ModuleIndex | None:
        mod = self.modules.get(modname)
        if mod is not None or modname in self._missing or self.loader is None:
            return mod
        self._missing.add(modname)
        rel = modname.replace(".", os.sep)
        for root in self.roots:
            for candidate in (os.path.join(root, rel + ".py"), os.path.join(root, rel, "__init__.py")):
                if os.path.isfile(candidate) and self._is_allowed(candidate):
                    mod = self.loader(candidate)
                    if mod is not None:
                        self.modules[modname] = mod
                        self._missing.discard(modname)
                        return mod
        return None

    def _is_allowed(self, path: str) -> bool:
        path = os.path.abspath(path)
        if path in self.by_path:
            return True
        return any(path.startswith(d + os.sep) for d in self.allowed)

    def _roots_present(self) -> set[str]:
        """First parts of the module names indexed so far (recomputed when modules are added)."""
        if self._roots is None or self._roots[0] != len(self.modules):
            self._roots = (len(self.modules), {m.split(".", 1)[0] for m in self.modules})
        return self._roots[1]

    def lookup(self, qual: str, _depth: int = 0):
        """A qualified name -> FuncRef / ClassIndex / ModuleIndex defined in the project, else None."""
        if _depth > 4 or not qual:
            return None
        parts = qual.split(".")
        for cut in range(len(parts), 0, -1):
            modname = ".".join(parts[:cut])
            mod = self.modules.get(modname)
            if mod is None:
                if parts[0] in _LIBRARY_ROOTS and parts[0] not in self._roots_present():
                    return None  # never load library code on demand unless it is part of the checked project
                mod = self.module(modname)
            if mod is None:
                continue
            rest = parts[cut:]
            if not rest:
                return mod
            name = rest[0]
            if len(rest) == 1:
                if name in mod.defs:
                    return FuncRef(mod, mod.defs[name], None, name)
                if name in mod.classes:
                    return mod.classes[name]
            elif len(rest) == 2 and name in mod.classes:
                ref = mod.classes[name].method_ref(rest[1])
                if ref is not None:
                    return ref
            if name in mod.imports:  # a re-export: follow it
                target = mod.imports[name]
                if target != qual:
                    return self.lookup(".".join([target, *rest[1:]]), _depth + 1)
            return None
        return None
