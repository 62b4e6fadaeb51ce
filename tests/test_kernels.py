"""Every kernel is declared once (``gpipe/kernels.py``): each declaration against its CUDA signature, its CPU twin
and ``kernels/README.md``, without a GPU (and compiled with ``nvcc`` where it is installed)."""

import inspect
import re
import shutil
import subprocess
import types

import numpy as np
import pytest

import gpipe  # imports every module that declares a kernel
from gpipe.kernels import TYPES, declared, kernel_dir, readme_table

KERNELS = {k.signature: k for k in declared()}
_GLOBAL = re.compile(r"(template\s*<([^>]*)>\s*)?(extern\s+\"C\"\s+)?__global__\s+void\s+"
                     r"(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(([^)]*)\)")


def _template(parameters: str | None) -> str | None:
    """A template's parameters as the checks name them: its type parameter's name, then how many others it has
    (``typename IdT, bool Bounded, bool Exact``: ``IdT + 2``)."""
    if parameters is None:
        return None
    words = [p.split() for p in parameters.split(",")]
    names = [w[-1] for w in words if w[0] == "typename"]
    return " + ".join(names + [str(len(words) - len(names))] * (len(words) > len(names)))


def cuda_signatures(source: str) -> dict:
    """``{kernel: (template or None, extern "C", [(name, C type, pointer, const), ...])}`` of a ``.cu`` source."""
    source = re.sub(r"//[^\n]*|/\*.*?\*/", "", source, flags=re.S)
    out = {}
    for m in _GLOBAL.finditer(source):
        params = []
        for param in m.group(5).split(","):
            words = param.replace("*", " * ").replace("__restrict__", "").split()
            ctype = " ".join(w for w in words[:-1] if w not in ("const", "*"))
            params.append((words[-1], ctype, "*" in words, "const" in words))
        out[m.group(4)] = (_template(m.group(2)), bool(m.group(3)), params)
    return out


def declared_signature(kernel) -> tuple:
    """What ``cuda_signatures`` should read for ``kernel``: the declared arguments, then ``next`` when queued."""
    params = [(a.name, "IdT" if a.base == "IdT" else TYPES[a.base][1], a.is_array, a.is_array and not a.out)
              for a in kernel.args]
    if kernel.queued:
        params.append(("next", "unsigned long long", True, False))
    names = ["IdT"] * kernel.templated + [str(len(kernel.template))] * bool(kernel.template)
    return " + ".join(names) or None, params


def mismatches(kernel, source: str) -> list[str]:
    """How ``kernel``'s declaration and its ``__global__`` in ``source`` differ, parameter by parameter."""
    found = cuda_signatures(source).get(kernel.name)
    if found is None:
        return [f"{kernel.name} is not a __global__ of {kernel.file}"]
    (template, extern_c, params), (want_template, want) = found, declared_signature(kernel)
    out = [f"template {template} in CUDA, {want_template} declared"] if template != want_template else []
    if template is None and not extern_c:  # the loader looks a plain kernel up by its unmangled name
        out.append(f"{kernel.name} is not extern \"C\": its name is mangled, the loader cannot find it")
    out += [f"parameter {i}: {p} in CUDA, {w} declared" for i, (p, w) in enumerate(zip(params, want)) if p != w]
    if len(params) != len(want):
        out.append(f"{len(params)} parameters in CUDA, {len(want)} declared")
    return out


def _source(kernel) -> str:
    return (kernel_dir() / kernel.file).read_text()


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_declared_kernel_matches_its_cuda_signature(name):
    """Names, order, C types (``IdT`` for templated id arrays) and const-ness (inputs) of every parameter."""
    kernel = KERNELS[name]
    assert mismatches(kernel, _source(kernel)) == []


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_declared_kernel_twin_takes_the_same_arguments(name):
    kernel = KERNELS[name]
    assert list(inspect.signature(kernel.twin.py_func).parameters) == [a.name for a in kernel.args]


@pytest.mark.parametrize("edit, problem", [
    (("long long lo, long long hi", "long long hi, long long lo"), "parameter 4: ('hi', 'long long', False, False)"),
    (("int length", "long long length"), "parameter 8: ('length', 'long long', False, False)"),
    (("const int* __restrict__ step", "int* __restrict__ step"), "parameter 15: ('step', 'int', True, False)"),
    (("signed char* __restrict__ moved, ", ""), "22 parameters in CUDA, 23 declared"),
    (("template <typename IdT>", "template <typename T>"), "template T in CUDA, IdT declared"),
])
def test_a_kernel_that_drifts_from_its_declaration_is_caught(edit, problem):
    """Swapped scalars of one type compile and run, wrongly, on the GPU only: the signature check sees them."""
    kernel = KERNELS["gp_walk_first_order<IdT>"]
    source = _source(kernel)
    named = re.search(rf"void (__launch_bounds__\([^)]*\) )?{kernel.name}\(", source).start()
    at = source.rindex("template <typename IdT>", 0, named)  # this kernel's text on
    assert edit[0] in source[at:]
    edited = source[:at] + source[at:].replace(edit[0], edit[1], 1)
    assert any(m.startswith(problem) for m in mismatches(kernel, edited))


def test_a_declaration_with_swapped_arguments_is_caught():
    kernel = KERNELS["gp_walk_first_order<IdT>"]
    args = list(kernel.args)
    lo, hi = [a.name for a in args].index("lo"), [a.name for a in args].index("hi")
    args[lo], args[hi] = args[hi], args[lo]
    swapped = types.SimpleNamespace(name=kernel.name, file=kernel.file, args=args, queued=True, templated=True,
                                    template=())
    assert mismatches(swapped, _source(kernel)) == [
        "parameter 4: ('lo', 'long long', False, False) in CUDA, ('hi', 'long long', False, False) declared",
        "parameter 5: ('hi', 'long long', False, False) in CUDA, ('lo', 'long long', False, False) declared"]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
@pytest.mark.parametrize("file,defines", sorted({(k.file, tuple(sorted(k.defines.items()))) for k in KERNELS.values()}))
def test_cuda_source_compiles_with_each_kernels_defines(file, defines, tmp_path):
    """The loader compiles a whole file with one kernel's defines: every kernel of the file must build with them,
    templated ones for each vertex-id type and as declared (a template is only checked once instantiated)."""
    source = tmp_path / "unit.cu"
    source.write_text(f'#include "{kernel_dir() / file}"\n' + "".join(
        f"void* gp_instance_{i}_{n} = (void*)&{k.name}<{', '.join((*t, *k.template))}>;\n"
        for i, k in enumerate(k for k in KERNELS.values() if k.file == file and (k.templated or k.template))
        for n, t in enumerate((("int",), ("long long",)) if k.templated else ((),))))
    command = ["nvcc", "-arch=sm_90", "-std=c++17", f"-I{kernel_dir()}", *(f"-D{k}={v}" for k, v in defines),
               "-c", str(source), "-o", str(tmp_path / "out.o")]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_launch_checks_its_arguments_against_the_declaration():
    kernel = KERNELS["gp_walk_first_order<IdT>"]
    args = {a.name: np.zeros(1, np.dtype(TYPES["i64" if a.base == "IdT" else a.base][0])) if a.is_array else 0
            for a in kernel.args}
    with pytest.raises(TypeError, match=r"missing arguments \['n'\], unexpected \['count'\]"):
        kernel.launch(**{k: v for k, v in args.items() if k != "n"}, count=0)
    wrong = "'step' must be a C-contiguous int32 array on the cpu like the others, got int64 on the cpu"
    with pytest.raises(TypeError, match=wrong):
        kernel.launch(**dict(args, step=np.zeros(1, np.int64)))
    with pytest.raises(TypeError, match="'walk_id' must be a C-contiguous int64 array.*contiguous: False"):
        kernel.launch(**dict(args, walk_id=np.zeros(4, np.int64)[::2]))
    with pytest.raises(TypeError, match=r"IdT arrays must share one dtype, int32 or int64, got \['int32', 'int64'\]"):
        kernel.launch(**dict(args, flat=np.zeros(1, np.int32)))
    kernel.launch(**args)  # n = 0: nothing to do


def test_every_cuda_kernel_is_declared():
    """A kernel without a declaration would be launched by hand again, its arguments written out once more."""
    found = {name: path.name for path in kernel_dir().glob("*.cu") for name in cuda_signatures(path.read_text())}
    assert found == {k.name: k.file for k in KERNELS.values()}
    instantiated = {(k.name, k.template) for k in KERNELS.values()}
    assert len(instantiated) == len(KERNELS), "two declarations of one instantiation"


def test_readme_table_is_rendered_from_the_declarations():
    readme = (kernel_dir() / "README.md").read_text()
    written = re.search(r"<!-- rendered by gpipe.kernels.readme_table\(\) -->\n(.*?)\n<!-- end", readme, re.S)
    table = readme_table()
    assert written and written.group(1) == table, f"kernels/README.md's table is stale; this one goes there:\n{table}"


class _DeviceArray:
    """What ``Kernel.launch`` reads of a cupy array (its dtype, its layout), to follow the GPU branch on a CPU."""

    def __init__(self, dtype):
        self.dtype = np.dtype(dtype)
        self.flags = types.SimpleNamespace(c_contiguous=True)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_launch_on_device_arrays_passes_the_declared_arguments_to_cuda(name, monkeypatch):
    """The CuPy call: the arrays as given, the scalars cast to their declared dtype, in declared order, with the
    template for the id arrays' dtype, the file's defines and ``items`` x ``lanes`` threads (or queued)."""
    kernel = KERNELS[name]
    calls = []
    monkeypatch.setattr(gpipe.kernels, "_function", lambda *args, **kwargs: (args, kwargs))
    monkeypatch.setattr(gpipe.kernels, "_launch", lambda *call: calls.append(("per-item", *call)))
    monkeypatch.setattr(gpipe.kernels, "_launch_queued", lambda *call: calls.append(("queued", *call)))
    values = {a.name: _DeviceArray("int32" if a.base == "IdT" else TYPES[a.base][0]) if a.is_array else 7
              for a in kernel.args}
    kernel.launch(**values)
    [(shape, compiled, threads, args)] = calls
    assert compiled == ((kernel.file, kernel.name), {"defines": kernel.defines,
                                                     "template": ("int",) * kernel.templated + kernel.template})
    assert (shape, threads) == (("queued", 7) if kernel.queued else ("per-item", 7 * kernel.lanes))
    assert len(args) == len(kernel.args)
    for a, value in zip(kernel.args, args):
        if a.is_array:
            assert value is values[a.name]
        else:
            assert type(value) is np.dtype(TYPES[a.base][0]).type and value == 7


def _instantiations() -> set:
    """Every declared kernel's instantiations: (name, template arguments), for int and long long ids."""
    return {(k.name, (*ids, *k.template)) for k in KERNELS.values()
            for ids in ((("int",), ("long long",)) if k.templated else ((),))}


def test_warm_compiles_every_twin_for_the_types_a_launch_passes():
    """``gpipe warmup`` on a CPU: each twin compiled for each id type, with the numba types ``launch`` passes it
    (so the first launch loads it from numba's cache instead of compiling)."""
    from gpipe.kernels import _twin_signature, warm

    seen = []
    summary = warm("cpu", progress=lambda done, total, name: seen.append((done, total, name)))
    assert summary["device"] == "cpu" and summary["kernels"] == len(_instantiations()) == len(seen)
    assert [d for d, _, _ in seen] == list(range(1, len(seen) + 1)) and {n for _, _, n in seen} == set(KERNELS)
    for kernel in KERNELS.values():
        for ids in (np.dtype(np.int32), np.dtype(np.int64)) if kernel.templated else (None,):
            assert _twin_signature(kernel, ids) in kernel.twin.signatures, (kernel.signature, ids)
    launch = KERNELS["gp_draws"]  # a 2-D argument (u64[n,2]) is compiled as one
    assert _twin_signature(launch, None)[-1].ndim == 2


def test_warm_on_a_gpu_compiles_every_instantiation_with_its_defines(monkeypatch):
    compiled = []
    monkeypatch.setattr(gpipe.kernels, "_function", lambda file, name, *, defines, template: compiled.append(
        (name, template, defines == next(k for k in KERNELS.values() if k.name == name).defines)))
    reductions = []  # CuPy's own, compiled by using them
    monkeypatch.setattr(gpipe.kernels, "_warm_reductions", lambda: reductions.append(True))
    assert gpipe.kernels.warm("gpu")["kernels"] == len(compiled)
    assert {(name, template) for name, template, _ in compiled} == _instantiations() and all(d for *_, d in compiled)
    assert reductions == [True]


def test_a_kernel_that_does_not_compile_is_named(monkeypatch):
    def broken(signature):
        raise TypeError("no implementation of setitem")

    kernel = types.SimpleNamespace(signature="gp_broken<IdT>", file="broken.cu", templated=True, template=(),
                                   args=(), twin=types.SimpleNamespace(compile=broken))
    monkeypatch.setattr(gpipe.kernels, "declared", lambda: [kernel])
    with pytest.raises(gpipe.GpipeError, match=r"kernel gp_broken<IdT> \(broken.cu\) does not compile for the cpu "
                                               r"with int32 ids: no implementation of setitem"):
        gpipe.kernels.warm("cpu")
