"""The pipeline: read and parse each file once, find regions, walk them, filter, sort.

Per file: read (encoding cookie, notebooks), ``ast.parse``, a shallow index. Project pass: regions,
then for each region a walk over the functions it reaches (each analysed once), then checks that
look around a capture. Findings are filtered by selection, per-file ignores and ``noqa``.
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import gc
import os
import traceback
import warnings

from cgkit.check import around, callers, calls, noqa, passed, regions
from cgkit.check.config import Config, load_config
from cgkit.check.facts import merge_argument_kinds
from cgkit.check.model import CANDIDATE_KIND, CheckResult, Finding
from cgkit.check.project import ModuleIndex, Project
from cgkit.check.rules import RULES, Dispatch, dispatch
from cgkit.check.sources import (
    CHECKED_SUFFIXES,
    Source,
    SourceError,
    is_python_file,
    iter_python_files,
    read_source,
)
from cgkit.errors import CgkitError

_KLASS_ORDER = {"manual": 0, "compile": 1, "candidate": 2}


def expand_codes(values, option: str) -> list[str]:
    """Validate codes or prefixes (``CG1``, ``CG101``, ``ALL``); comma-separated strings are split."""
    out: list[str] = []
    for value in values or ():
        for token in str(value).replace(",", " ").split():
            token = token.strip().upper()
            if token == "ALL":
                out.append("CG")
                continue
            if not any(code.startswith(token) for code in RULES) and token not in _names():
                raise CgkitError(f"{option}: unknown rule code or prefix {token!r} (see `cgkit rules`)")
            out.append(_names().get(token, token))
    return out


def _names() -> dict[str, str]:
    return {rule.name.upper(): code for code, rule in RULES.items()}


class _Selection:
    def __init__(self, select, ignore, config: Config):
        self.select = select
        self.ignore = ignore
        self.config = config
        self._per_file: dict[str, list[str]] = {}

    def allows(self, code: str, path: str) -> bool:
        if self.select is not None and not noqa.matches(code, self.select):
            return False
        if self.ignore and noqa.matches(code, self.ignore):
            return False
        per_file = self._per_file.get(path)
        if per_file is None:
            per_file = self._per_file[path] = [c.upper() for c in self.config.ignored_for(path)]
        return not (per_file and noqa.matches(code, per_file))


class _AnnotatedAssignments(ast.NodeTransformer):
    """``x: Tensor = f()`` and ``self.scale: float = 1.0`` in code are read as the assignments they are (with
    the annotation kept on the node, ``.annotation``); a class body's ``field: T = default`` lines stay
    annotations (dataclass fields, read as such)."""

    def visit_ClassDef(self, node):
        node.body = [stmt if type(stmt) is ast.AnnAssign else self.visit(stmt) for stmt in node.body]
        return node

    def visit_AnnAssign(self, node):
        if node.value is None:
            return node
        assign = ast.copy_location(ast.Assign(targets=[node.target], value=node.value), node)
        assign.end_lineno, assign.end_col_offset = node.end_lineno, node.end_col_offset
        assign.annotation = node.annotation
        return assign


class RegionContext:
    def __init__(self, project: Project, all_regions):
        self.project = project
        self.regions = list(all_regions)
        self._once: set = set()
        self._memo: dict = {}
        self._by_scope: dict[int, list] = {}
        for region in all_regions:
            if region.scope is not None:
                self._by_scope.setdefault(region.scope.key, []).append(region)

    def once(self, key) -> bool:
        if key in self._once:
            return False
        self._once.add(key)
        return True

    def memo(self, key, compute):
        """``compute()`` once per key for this run (what several region rules read)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def regions_in_scope(self, region) -> list:
        return self._by_scope.get(region.scope.key, []) if region.scope is not None else []

    def captures_in(self, fref) -> bool:
        """Whether the function holds a manual capture of its own."""
        return any(r.klass == "manual" for r in self._by_scope.get(fref.key, ()))

    def resolve(self, facts, call):
        return calls.resolve_call(facts, call)


class Checker:
    def __init__(self, select=None, ignore=None, region_names=None, config: Config | None = None):
        self.config = config or Config()
        sel = expand_codes(select, "--select") if select else None
        if sel is None and self.config.select is not None:
            sel = expand_codes(self.config.select, "[tool.cgkit] select")
        ign = expand_codes(self.config.ignore, "[tool.cgkit] ignore") + expand_codes(ignore or [], "--ignore")
        for codes in self.config.per_file_ignores.values():
            expand_codes(codes, "[tool.cgkit] per-file-ignores")
        self.selection = _Selection(sel, ign, self.config)
        self.dispatch: Dispatch = dispatch(_selected_codes(sel, ign))
        # Functions declared as regions: [tool.cgkit] regions (project-wide, so a name need not be in
        # every checked file) and --region names (each must name a function of the checked files).
        self.region_names = list(dict.fromkeys([*self.config.regions, *(region_names or [])]))
        self.required_region_names = list(dict.fromkeys(region_names or []))
        self.project = Project()
        self.project.loader = self._load_extra
        self.project.before_constructor = lambda init: callers.seed_from_callers(init, self.project)
        self.findings: list[Finding] = []
        self.regions: list[dict] = []  # each analysed region, with the number of functions followed from it
        self.errors: list[str] = []
        self.files = 0
        self.lines = 0
        self._seen: dict[tuple, int] = {}  # (path, line, col, code) -> index of its finding
        self._suppressions: dict[str, noqa.Suppressions] = {}

    # -- reading -------------------------------------------------------------------------------
    def _parse(self, source: Source, checked: bool) -> ModuleIndex | None:
        try:
            tree = _AnnotatedAssignments().visit(ast.parse(source.text, filename=source.path))
        except SyntaxError as exc:
            if checked:
                line = exc.lineno or 1
                col = exc.offset or 1
                self._tool_finding("CG901", source, line, col, what=f"{exc.msg} (line {line})")
            return None
        except (ValueError, RecursionError, MemoryError) as exc:
            if checked:
                self._tool_finding("CG901", source, 1, 1, what=str(exc) or type(exc).__name__)
            return None
        modname, is_package, root = Project.module_name(source.path)
        module = ModuleIndex(source, tree, modname, is_package, checked)
        self.project.add(module, root)
        return module

    def _load_extra(self, path: str) -> ModuleIndex | None:
        """Load a project file that a checked file imports (not itself checked: no CG9xx for it)."""
        display = os.path.relpath(path) if not os.path.isabs(path) or path.startswith(os.getcwd()) else path
        try:
            source = read_source(display)
        except SourceError:
            return None
        return self._parse(source, checked=False)

    def add_paths(self, paths: list[str]) -> None:
        """Add the files named and those under the folders named; a path that does not exist, or a file
        that is not Python source, is a usage error (CgkitError), not a finding."""
        for path in paths:
            if not os.path.exists(path):
                raise CgkitError(f"{path}: no such file or directory")
            if not os.path.isdir(path) and not is_python_file(path):
                raise CgkitError(f"{path}: not a Python file or notebook ({', '.join(CHECKED_SUFFIXES)}); "
                                 "name Python files, or folders to search for them")
        for path in paths:
            absolute = os.path.abspath(path)
            directory = absolute if os.path.isdir(absolute) else os.path.dirname(absolute)
            if directory not in self.project.allowed:
                self.project.allowed.append(directory)
        for path, _explicit in iter_python_files(paths):
            self.add_file(path)

    def add_file(self, path: str) -> None:
        self.files += 1
        try:
            source = read_source(path)
        except SourceError as exc:
            self._tool_finding("CG902", Source(path, ""), 1, 1, what=str(exc))
            return
        self.add_source(source)

    def add_source(self, source: Source) -> None:
        self.lines += source.text.count("\n")
        absolute = os.path.abspath(source.path)
        if absolute in self.project.by_path:
            return
        module = self._parse(source, checked=True)
        if module is not None:
            self.project.checked.append(module)

    # -- analysis ------------------------------------------------------------------------------
    def run(self) -> CheckResult:
        declared = self._declared_regions()
        found = []
        for module in list(self.project.checked):
            try:
                found.extend(regions.find_regions(module, self.project))
            except Exception:  # noqa: BLE001 - one file's internal error must not stop the others
                self._internal_error(module.path, "finding regions")
        found.sort(key=lambda r: (_KLASS_ORDER[r.klass], r.module.path, r.line))
        ctx = RegionContext(self.project, found)
        self._analyse_all(found, ctx)
        # Code that no region covers gets its candidates (each module forward and training step,
        # reported as info), decided per unit: a package (all checked files under one top-level
        # package), or a file on its own. What a unit gets does not depend on unrelated files on the
        # command line; a unit with a capture, or reached by one, gets no guesses.
        covered = {_unit(region.module) for region in found}
        for region in found:
            covered.update(_unit(facts.module) for facts, _span, _chain in region.reached)
        candidates = []
        for module in self.project.checked:
            if _unit(module) not in covered:
                try:
                    candidates.extend(regions.candidate_regions(module, self.project))
                except Exception:  # noqa: BLE001
                    self._internal_error(module.path, "finding candidate regions")
        self._analyse_all(candidates, RegionContext(self.project, candidates))
        # Declared regions come last, so they only add: every finding of the run without them stays
        # as it was (a candidate's info becomes the declared region's finding, of its severity).
        for region in declared:
            callers.seed_from_callers(region.roots[0], self.project)
        self._analyse_all(declared, RegionContext(self.project, [*found, *declared]))
        self.findings.sort(key=Finding.sort_key)
        self.project.release()  # findings are plain data: nothing needs the index any more
        return CheckResult(self.findings, self.errors, files=self.files, lines=self.lines, regions=self.regions)

    def _declared_regions(self) -> list:
        """The regions of --region and [tool.cgkit] regions; a --region name that matches no function
        of the checked files is a usage error (naming the near ones)."""
        if not self.region_names:
            return []
        declared, matched = [], set()
        for module in self.project.checked:
            for name, region in regions.declared_regions(module, self.region_names):
                matched.add(name)
                declared.append(region)
        unknown = [name for name in self.required_region_names if name not in matched]
        if unknown:
            functions, classes = set(), set()
            for module in self.project.checked:
                module_functions, module_classes = regions.qualified_names(module)
                functions.update(module_functions)
                classes.update(module_classes)
            raise CgkitError(_unknown_regions_message(unknown, functions, classes))
        declared.sort(key=lambda r: (r.module.path, r.line))
        return declared

    def _analyse_all(self, found, ctx: RegionContext) -> None:
        for region in found:
            try:
                self._analyse(region, ctx)
            except Exception:  # noqa: BLE001
                self._internal_error(region.module.path, f"analysing the region at line {region.line}")

    def _analyse(self, region, ctx: RegionContext) -> None:
        if region.span is not None and region.scope is not None:
            callers.seed_from_callers(region.scope, self.project)  # the capturing function's parameters
        region.passed = passed.passed_callables(region, self.project)
        for root in region.roots:  # compiled: what its callers pass
            passed_kinds: dict = {}
            for invocation in around.invocations(region, ctx):
                merge_argument_kinds(passed_kinds, calls.argument_kinds(invocation.facts, invocation.call.node, root))
            self.project.seed(root, passed_kinds)

        def emit(hazard, facts, chain):
            self._emit(hazard.code, facts.module, hazard.node, hazard.args, region, chain, hazard.stmt)

        region.reached = calls.walk(region, self.project, self.dispatch.function_hazards, emit)
        self.regions.append({**_map_region(region), "functions_followed": len(region.reached)})
        for hazard in self.dispatch.region_hazards(region, ctx):
            self._emit(hazard.code, hazard.module, hazard.node, hazard.args, region, list(hazard.chain), None)

    def _emit(self, code: str, module: ModuleIndex, node, args: dict, region, chain, stmt) -> None:
        rule = RULES[code]
        severity = rule.severity(region.klass)
        if severity is None or (args.get("manual_only") and region.klass == "compile"):
            return  # (a hazard of manual capture that a compiled region measured harmless)
        path = module.path
        if not self.selection.allows(code, path):
            return
        line = getattr(node, "lineno", 1) or 1
        key = (path, line, getattr(node, "col_offset", 0), code)
        earlier = self._seen.get(key)
        if earlier is not None and not (region.kind == "declared" and self.findings[earlier].region
                                        and self.findings[earlier].region["kind"] == CANDIDATE_KIND):
            return
        lines = (line,) if stmt is None or stmt.lineno == line else (line, stmt.lineno)
        if self._suppressed(module, code, lines):
            return
        end_line = getattr(node, "end_lineno", None) or line
        col = _char_col(module.lines, line, getattr(node, "col_offset", 0) or 0)
        end_col = _char_col(module.lines, end_line, getattr(node, "end_col_offset", None) or 0)
        cell, line_in_cell = module.source.cell_of(line)
        file_line = file_end_line = None
        if cell is not None:
            file_line, file_end_line = module.source.file_line(line), module.source.file_line(end_line)
            end_line = module.source.cell_of(end_line)[1]
            line = line_in_cell
        finding = Finding(
            path=path,
            line=line,
            col=col,
            end_line=end_line,
            end_col=end_col,
            code=code,
            name=rule.name,
            category=rule.category_for(region.klass),
            severity=severity,
            message=rule.render_message(region.klass, args),
            fix=_format(rule.fix, args),
            region=_map_region(region),
            chain=[_map_step(step, self.project) for step in chain],
            url=rule.url,
            cell=cell,
            file_line=file_line,
            file_end_line=file_end_line,
        )
        if earlier is None:
            self._seen[key] = len(self.findings)
            self.findings.append(finding)
        else:
            self.findings[earlier] = finding

    def _suppressed(self, module: ModuleIndex, code: str, lines) -> bool:
        sup = self._suppressions.get(module.path)
        if sup is None:
            sup = self._suppressions[module.path] = noqa.Suppressions(module.text, module.lines)
        return sup.suppressed(code, lines)

    def _tool_finding(self, code: str, source: Source, line: int, col: int, **args) -> None:
        rule = RULES[code]
        if not self.selection.allows(code, source.path):
            return
        cell, line_in_cell = source.cell_of(line)
        file_line = source.file_line(line) if cell is not None else None
        self.findings.append(
            Finding(
                path=source.path,
                line=line_in_cell,
                col=max(1, col),
                end_line=line_in_cell,
                end_col=max(1, col),
                code=code,
                name=rule.name,
                category=rule.category,
                severity="error",
                message=_format(rule.message, args),
                fix=rule.fix,
                url=rule.url,
                cell=cell,
                file_line=file_line,
                file_end_line=file_line,
            )
        )

    def _internal_error(self, path: str, what: str) -> None:
        tb = traceback.format_exc(limit=-3).strip().splitlines()
        self.errors.append(f"{path}: internal error while {what}: {tb[-1] if tb else '?'}")


def _unknown_regions_message(unknown: list[str], functions: set[str], classes: set[str]) -> str:
    parts = []
    for name in unknown:
        if name in classes:
            methods = sorted(f for f in functions if f.startswith(name + ".") and f.count(".") == name.count(".") + 1)
            parts.append(f"--region {name}: class {name} has no forward() to capture; name one of its methods"
                         f" ({', '.join(methods[:8]) or 'it has none'})")
            continue
        known = functions | classes
        bare = {qual.rsplit(".", 1)[-1] for qual in known}
        near = difflib.get_close_matches(name, sorted(known | bare), n=5, cutoff=0.6)
        if near:
            parts.append(f"--region {name}: no function or class of that name in the checked files "
                         f"(did you mean: {', '.join(near)}?)")
        else:
            shown = sorted(n for n in known if not n.rsplit(".", 1)[-1].startswith("_"))
            listed = (", ".join(shown[:12]) + (", ..." if len(shown) > 12 else "")) if shown else "none"
            parts.append(f"--region {name}: no function or class of that name in the checked files "
                         f"(they define: {listed})")
    parts.append("a region is a function (func, outer.inner), a method (Class.method) or a class (its forward)")
    return "\n".join(parts)


def _unit(module) -> str:
    """A file's unit for the candidate fallback: its top-level package (with the folder it is imported
    from), or the file itself when it is a loose script."""
    if "." not in module.modname and not module.is_package:
        return module.path
    _name, _is_package, root = Project.module_name(module.path)
    return os.path.join(root, module.modname.split(".", 1)[0])


def _format(template: str, args: dict) -> str:
    try:
        return template.format(**args)
    except (KeyError, IndexError, ValueError):
        return template


def _char_col(lines: list[str], line: int, byte_col: int) -> int:
    """ast columns are UTF-8 byte offsets; findings use 1-based character columns."""
    if 1 <= line <= len(lines):
        text = lines[line - 1]
        if not text.isascii():
            return len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore")) + 1
    return byte_col + 1


def _map_region(region) -> dict:
    data = region.as_dict()
    cell, line = region.module.source.cell_of(region.line)
    if cell is not None:
        data["cell"], data["line"] = cell, line
    return data


def _map_step(step: dict, project: Project) -> dict:
    module = project.by_path.get(os.path.abspath(step["path"]))
    if module is None or not module.source.cells:
        return step
    step = dict(step)
    cell, line = module.source.cell_of(step["line"])
    step["cell"], step["line"] = cell, line
    return step


def check_paths(
    paths: list[str],
    select=None,
    ignore=None,
    regions: list[str] | None = None,
    config: Config | None = None,
    use_config: bool = True,
) -> CheckResult:
    """Check files, directories (recursively) and notebooks.

    Raises CgkitError for bad options or config, a path that does not exist, a file named that is not
    Python, a --region name that names no function, and when no Python file was found (nothing checked).
    """
    if config is None and use_config:
        config = load_config(list(paths))
    checker = Checker(select=select, ignore=ignore, region_names=regions, config=config)
    with _quiet_and_fast():
        checker.add_paths(list(paths))
        if checker.files == 0:
            raise CgkitError(f"nothing was checked: no Python files ({', '.join(CHECKED_SUFFIXES)}) in "
                             f"{', '.join(paths) or 'no paths'}")
        return checker.run()


@contextlib.contextmanager
def _quiet_and_fast():
    """Silence SyntaxWarnings from the user's code, and pause the cyclic GC: syntax trees hold
    no cycles, but with thousands of them alive each collection would walk them all again
    (measured: it more than doubles the time on torch's nn/optim/cuda)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        if enabled:
            gc.enable()


def check_source(text: str, path: str = "<string>.py", select=None, ignore=None, regions=None) -> CheckResult:
    """Check one piece of source (tests, examples); imports resolve only within it."""
    checker = Checker(select=select, ignore=ignore, region_names=regions, config=Config())
    with _quiet_and_fast():
        checker.files = 1
        checker.add_source(Source(path, text))
        return checker.run()


def _selected_codes(select, ignore) -> frozenset[str] | None:
    """The rules whose matchers run: --select/--ignore (and [tool.cgkit]) leave the others out."""
    if select is None and not ignore:
        return None
    return frozenset(code for code in RULES
                     if (select is None or noqa.matches(code, select)) and not (ignore and noqa.matches(code, ignore)))
