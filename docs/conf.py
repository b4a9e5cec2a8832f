"""Sphinx's settings for gpumem's documentation site (make docs).

The pages are docs/*.md and the README (MyST).  The Python reference is
autodoc of the built extension module: its docstrings, with the
signatures of the type stubs (GPUMEM_STUBS, the folder stubs/gpumem of
a build, which make docs names), so a page cannot show a signature the
module does not have.  The C API shows include/gpumem/*.h, the manual
pages their text.  make docs runs sphinx-build -W -n: warnings are
errors, and every reference to one of gpumem's own names must resolve.
"""

import ast
import os
import re
import shutil
import subprocess

from docutils import nodes
from docutils.parsers.rst import Directive, directives

project = "gpumem"
author = "the gpumem authors"
with open(os.path.join(os.path.dirname(__file__), "..", "configure.ac"),
          encoding="utf-8") as f:
    release = re.search(r"AC_INIT\(\[gpumem\],\s*\[([^\]]+)\]",
                        f.read()).group(1)
version = release

extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
myst_heading_anchors = 3
html_theme = "alabaster"
html_static_path = []
html_title = f"gpumem {release}"

autodoc_default_options = {"no-value": True}
autodoc_typehints = "signature"
# Every reference to a gpumem name must resolve; other projects' names
# (numpy.dtype, int) have no inventory here (no network): not checked.
nitpicky = True
nitpick_ignore_regex = [(r"py:.*", r"(?!gpumem\b).*")]


def _stub_signatures(folder):
    """{qualified name: (argument list, return annotation)} of every
    function and method of the stubs in FOLDER, the stubs' private type
    aliases written out and gpumem's classes named in full."""
    signatures = {}
    for filename, module in (("__init__.pyi", "gpumem"),
                             ("kernels.pyi", "gpumem.kernels"),
                             ("comm.pyi", "gpumem.comm")):
        with open(os.path.join(folder, filename), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        aliases, classes = {}, set()
        for node in tree.body:
            if (isinstance(node, ast.AnnAssign) and node.value is not None
                    and isinstance(node.target, ast.Name)
                    and node.target.id.startswith("_")):
                aliases[node.target.id] = node.value
            elif isinstance(node, ast.ClassDef):
                classes.add(node.name)
            elif isinstance(node, ast.ImportFrom) and node.module == "gpumem":
                classes.update(a.name for a in node.names)

        class Spell(ast.NodeTransformer):
            def visit_Name(self, name):
                if name.id in aliases:
                    return self.visit(ast.parse(
                        ast.unparse(aliases[name.id]), mode="eval").body)
                if name.id in classes and not name.id.startswith("_"):
                    return ast.Attribute(ast.Name("gpumem"), name.id)
                return name

        def spell(annotation):
            if annotation is None:
                return None
            return ast.unparse(Spell().visit(ast.parse(
                ast.unparse(annotation), mode="eval").body))

        def add(name, fn, method):
            args = fn.args
            if method and (args.posonlyargs or args.args):
                if args.posonlyargs:
                    args.posonlyargs = args.posonlyargs[1:]
                else:
                    args.args = args.args[1:]
            for a in args.posonlyargs + args.args + args.kwonlyargs + [
                    args.vararg, args.kwarg]:
                if a is not None:
                    a.annotation = (ast.parse(spell(a.annotation),
                                              mode="eval").body
                                    if a.annotation is not None else None)
            overloaded = any(isinstance(d, ast.Name) and d.id == "overload"
                             for d in fn.decorator_list)
            if overloaded and name in signatures:
                return
            signatures[name] = ("(" + ast.unparse(args) + ")",
                                spell(fn.returns))

        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                add(f"{module}.{node.name}", node, False)
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and not any(
                            isinstance(d, ast.Name) and d.id == "property"
                            for d in item.decorator_list):
                        add(f"{module}.{node.name}.{item.name}", item, True)
    return signatures


STUBS = os.environ.get("GPUMEM_STUBS")
if not STUBS or not os.path.isfile(os.path.join(STUBS, "__init__.pyi")):
    raise RuntimeError("GPUMEM_STUBS must name a build's stubs/gpumem "
                       "folder (make docs sets it)")
SIGNATURES = _stub_signatures(STUBS)


def _comm_from_the_stubs(folder):
    """gpumem.comm exists only in a build with MPI.  Elsewhere its entries
    are made from comm.pyi: the stubs' names and signatures, and a
    docstring that says so."""
    import sys
    import types

    import gpumem
    if hasattr(gpumem, "comm"):
        return
    note = ("gpumem.comm exists only in a build with MPI; this site was "
            "built without it.")
    comm = types.ModuleType("gpumem.comm", note)
    with open(os.path.join(folder, "comm.pyi"), encoding="utf-8") as f:
        exec(compile("from __future__ import annotations\n" + f.read(),
                     "comm.pyi", "exec"), comm.__dict__)
    for name in comm.__annotations__:
        setattr(comm, name, None)
    for value in vars(comm).values():
        if isinstance(value, types.FunctionType):
            value.__doc__ = note
    gpumem.comm = comm
    sys.modules["gpumem.comm"] = comm


_comm_from_the_stubs(STUBS)


def _signature_from_stubs(app, what, name, obj, options, signature,
                          return_annotation):
    """The stubs' signature of NAME in place of the docstring's (which
    has no types); a class shows its __new__'s or __init__'s."""
    keys = ([f"{name}.__new__", f"{name}.__init__"] if what == "class"
            else [name])
    for key in keys:
        if key in SIGNATURES:
            return SIGNATURES[key]
    if what in ("function", "method", "class") and name.startswith(
            "gpumem.") and signature:
        raise RuntimeError(f"{name} has a signature but no stub")
    return None


def _docstring_as_text(app, what, name, obj, options, lines):
    """gpumem's docstrings are plain text, as help() shows them
    (arguments in CAPS, examples indented), not reStructuredText: each
    is shown as it is, in a literal block."""
    if name.startswith("gpumem") and lines:
        lines[:] = ["::", ""] + ["   " + line for line in lines] + [""]


class ManPage(Directive):
    """.. gm-manpage:: PATH -- the manual page PATH (relative to the
    source folder) as nroff formats it for a terminal, or its source
    where nroff is missing, in a literal block."""

    required_arguments = 1
    option_spec = {}

    def run(self):
        env = self.state.document.settings.env
        path = os.path.normpath(os.path.join(env.srcdir,
                                             self.arguments[0]))
        env.note_dependency(path)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        nroff = shutil.which("nroff")
        if nroff is not None:
            formatted = subprocess.run(
                [nroff, "-man", "-Tutf8", "-rLL=80n", path],
                capture_output=True, text=True, check=True,
                env=dict(os.environ, MANWIDTH="80", GROFF_NO_SGR="1"))
            text = re.sub(r".\x08", "", formatted.stdout)
        block = nodes.literal_block(text, text)
        return [block]


def setup(app):
    app.connect("autodoc-process-signature", _signature_from_stubs)
    app.connect("autodoc-process-docstring", _docstring_as_text)
    directives.register_directive("gm-manpage", ManPage)
    return {"parallel_read_safe": True}
