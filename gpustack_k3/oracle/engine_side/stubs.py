"""Stand-ins for the modules an engine's argument parser imports but does not need to build its options.

Building vLLM's or SGLang's parser means importing its config classes, which import the whole runtime: torch,
CUDA kernels, tokenizers, the HTTP server. None of that decides which options exist, their types, choices or
defaults, so those modules are replaced by stubs: a stub module answers any attribute with a stub class, a
stub class answers any attribute, call, subscript or operator with another stub, and pydantic accepts it as
"any". The parser's own code (argparse calls, config dataclasses, Literal choices, defaults) is the engine's
real code from the wheel.

``STUBBED`` lists every stubbed top-level package with the reason it is not needed; importing any other
missing module fails loudly (``MissingModule``) so a new dependency is a decision, not an accident.
"""
from __future__ import annotations

import abc
import importlib.abc
import importlib.machinery
import importlib.metadata
import os
import sys
import types

# top-level package -> why a stub is enough (what the parser-building import chain uses it for)
STUBBED: dict[str, str] = {
    # GPU and tensor runtime: dtypes in annotations, device queries at import; no option depends on them
    "torch": "tensor runtime: dtype annotations and device probes at import",
    "torchvision": "tensor runtime (multimodal processors)",
    "torchaudio": "tensor runtime (audio processors)",
    "torchcodec": "tensor runtime (video decoding)",
    "triton": "GPU kernel compiler: kernels defined at import",
    "flashinfer": "GPU kernels",
    "flash_attn": "GPU kernels",
    "vllm_flash_attn": "GPU kernels",
    "deep_gemm": "GPU kernels",
    "deep_ep": "GPU kernels",
    "sgl_kernel": "GPU kernels (SGLang)",
    "flashinfer_python": "GPU kernels",
    "cuda": "CUDA bindings",
    "cupy": "CUDA arrays",
    "pynvml": "GPU management library probes",
    "nvidia": "CUDA libraries",
    "tilelang": "GPU kernel DSL",
    "tvm_ffi": "GPU kernel runtime",
    "apache_tvm_ffi": "GPU kernel runtime",
    "xgrammar": "structured-output kernels",
    "llguidance": "structured-output kernels",
    "outlines_core": "structured-output kernels",
    "lm_format_enforcer": "structured-output backend",
    "numba": "JIT compiler",
    "einops": "tensor helpers",
    "safetensors": "weight files",
    "compressed_tensors": "quantized weight formats",
    "depyf": "compile-cache debugging",
    "ray": "multi-node executor",
    "numpy": "array math in model helpers",
    "PIL": "image decoding (multimodal)",
    "cv2": "image/video decoding (multimodal)",
    "av": "video decoding",
    "librosa": "audio decoding",
    "soundfile": "audio decoding",
    "scipy": "math helpers",
    # model hub and tokenizers: loaded when a model is, not when the parser is built
    "transformers": "model configs and tokenizers: loaded for a model, not for the parser",
    "tokenizers": "tokenizers",
    "sentencepiece": "tokenizers",
    "tiktoken": "tokenizers",
    "mistral_common": "Mistral tokenizer",
    "huggingface_hub": "model hub client",
    "hf_transfer": "model hub download",
    "modelscope": "model hub client",
    "gguf": "GGUF weight files",
    "blake3": "hashing of prefix-cache keys",
    "xxhash": "hashing",
    "cpuinfo": "CPU feature probe",
    "psutil": "process and memory probes",
    "setproctitle": "process titles",
    # serving stack: request handling, not option parsing
    "fastapi": "HTTP server",
    "starlette": "HTTP server",
    "uvicorn": "HTTP server",
    "uvloop": "event loop",
    "aiohttp": "HTTP client",
    "httpx": "HTTP client",
    "requests": "HTTP client",
    "zmq": "inter-process messaging",
    "prometheus_client": "metrics",
    "prometheus_fastapi_instrumentator": "metrics",
    "opentelemetry": "tracing",
    "openai": "API protocol classes (request/response models)",
    "openai_harmony": "API protocol (harmony format)",
    "anthropic": "API protocol classes",
    "mcp": "tool-server protocol",
    "partial_json_parser": "tool-call parsing at request time",
    "pybase64": "request payload decoding",
    "cbor2": "serialization",
    "ijson": "streaming JSON",
    "cloudpickle": "serialization for workers",
    "watchfiles": "file watching",
    "pythonjsonlogger": "log formatting",
    "model_hosting_container_standards": "SageMaker entry points",
    "grpc": "gRPC server",
    "smg_grpc_proto": "gRPC protocol",
    "setuptools": "packaging helpers",
    "jsonschema": "structured-output schema checks at request time",
    "filelock": "download locks",
    "tqdm": "progress bars",
    "cachetools": "caches",
    "datasets": "benchmarks",
    "pandas": "benchmarks",
    "pydantic_settings": "SGLang environment settings loader",
    "interegular": "structured output",
    "outlines": "structured output",
    "decord": "video decoding",
    "sglang_router": "SGLang router",
    "IPython": "notebook helpers",
    "matplotlib": "plots",
    "torchao": "quantization kernels",
    "quack": "GPU kernels",
    "cutlass": "GPU kernels",
    "nvtx": "profiling",
    "kernels": "kernel hub",
    "triton_kernels": "GPU kernels",
    "aiter": "ROCm kernels",
    "amdsmi": "ROCm probes",
    "habana_frameworks": "Gaudi runtime",
    "intel_extension_for_pytorch": "XPU runtime",
    "tpu_info": "TPU probes",
    "jax": "TPU runtime",
    "msgpack": "serialization",
    "lark": "grammar parsing",
    "urllib3": "HTTP client",
    "soxr": "audio resampling",
    "runai_model_streamer": "weight streaming from object stores",
    "org": "JVM bridge probe (vllm.utils.import_utils)",
    "jinja2": "chat templates, rendered per request",
    "diskcache": "structured-output grammar cache",
    "termplotlib": "terminal plots in benchmarks",
}


# distribution name (normalised) -> its top-level module, where they differ
_DIST_MODULE = {"flashinfer_python": "flashinfer", "opencv_python_headless": "cv2", "pillow": "PIL",
                "py_cpuinfo": "cpuinfo", "pyzmq": "zmq", "python_json_logger": "pythonjsonlogger",
                "sgl_kernel": "sgl_kernel", "openai_harmony": "openai_harmony", "lm_format_enforcer": "lm_format_enforcer"}


class MissingModule(ImportError):
    pass


def _is_stub(cls) -> bool:
    return cls.__dict__.get("_stub_", False)


class _StubMeta(abc.ABCMeta):
    """Metaclass of every stub: any attribute, call, subscript or operator of a stub yields another stub.
    A class the engine derives from a stub is an ordinary class (its calls build real instances). ABCMeta as
    the base, so ``class X(nn.Module, ABC)`` has no metaclass conflict."""

    def __getattr__(cls, name: str):
        path = f"{cls.__module__}.{cls.__qualname__}.{name}"
        if not _is_stub(cls) or (name.startswith("__") and name.endswith("__") and path not in _VALUES):
            raise AttributeError(name)
        return _attr(cls.__module__, f"{cls.__qualname__}.{name}")

    def __call__(cls, *args, **kwargs):
        if not _is_stub(cls):
            return super().__call__(*args, **kwargs)
        if len(args) == 1 and callable(args[0]) and not kwargs and not isinstance(args[0], _StubMeta):
            return args[0]   # used as a decorator: keep the decorated function
        return _stub_class(f"{cls.__qualname__}()", cls.__module__)

    def __getitem__(cls, item):
        return cls

    def __setitem__(cls, key, value):
        pass

    def __delitem__(cls, key):
        pass

    def __contains__(cls, item):
        return False

    def __or__(cls, other):  # noqa: V107
        return cls

    def _same(cls, *other):  # noqa: V107
        return cls

    __ror__ = __and__ = __rand__ = __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _same
    __truediv__ = __rtruediv__ = __floordiv__ = __mod__ = __pow__ = __neg__ = __pos__ = __invert__ = _same

    def __iter__(cls):
        return iter(())

    def __len__(cls):
        return 0

    def __bool__(cls):
        return not _is_stub(cls)

    def __int__(cls):
        return 0

    def __index__(cls):
        return 0

    def __float__(cls):
        return 0.0

    def __lt__(cls, other):  # noqa: V107
        return False

    __gt__ = __le__ = __ge__ = __lt__

    def __repr__(cls):
        return f"<stub {cls.__module__}.{cls.__qualname__}>" if _is_stub(cls) else super().__repr__()

    def __get_pydantic_core_schema__(cls, source, handler):  # noqa: V107
        from pydantic_core import core_schema

        return core_schema.any_schema()

    def __enter__(cls):
        return cls

    def __exit__(cls, *exc):
        return False


def _instance_getattr(self, name: str):
    if name.startswith("__") and name.endswith("__"):
        raise AttributeError(name)
    return _stub_class(f"{type(self).__qualname__}().{name}", type(self).__module__)


def _instance_init(self, *args, **kwargs):
    pass


_STUBS: dict[tuple[str, str], type] = {}


def _stub_class(qualname: str, module: str) -> type:
    """One stub per name, so two reads of the same attribute compare equal."""
    key = (module, qualname)
    if key not in _STUBS:
        _STUBS[key] = _StubMeta(qualname.rsplit(".", 1)[-1], (), {
            "__qualname__": qualname, "__module__": module, "_stub_": True,
            # instances of a class derived from a stub (``class Layer(nn.Module)``) answer like the stub
            "__init__": _instance_init, "__getattr__": _instance_getattr})
    return _STUBS[key]


class _StubModule(types.ModuleType):
    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        value = _attr(self.__name__, name)
        setattr(self, name, value)
        return value


# Attributes whose value the import chain reads as a plain value (a schema string is split), by dotted path.
# A stubbed package's ``__version__`` is the version the wheel requires (StubFinder.versions).
# Device probes answer as on the target: a CUDA build of torch on an 8x B300 node (SM 10.3); the devices of
# other vendors are absent (_ABSENT) or unavailable, as in a CUDA build of torch.
_VALUES = {
    "torch.cuda.is_available": lambda: True,
    "torch.cuda.device_count": lambda: 8,
    "torch.cuda.get_device_capability": lambda *a, **k: (10, 3),
    "torch.cuda.get_device_name": lambda *a, **k: "NVIDIA B300 SXM6 AC",
    "torch.version.cuda": "12.9",
    "torch.version.hip": None,
    "torch.version.xpu": None,
    "torch.xpu.is_available": lambda: False,
    "torch.mps.is_available": lambda: False,
    "torch.cpu.is_available": lambda: True,
    "torch.library.infer_schema": lambda fn, *a, **k: _infer_schema(fn),
    # vLLM 0.34.0 checks at import that array.array typecodes match these dtypes' sizes
    # (vllm/utils/torch_utils.py:85-87@0.34.0)
    "torch.int32.itemsize": 4,
    "torch.int64.itemsize": 8,
    "torch.float32.itemsize": 4,
    # SGLang patches transformers' config validators at import (srt/utils/hf_transformers_patches.py)
    "transformers.PretrainedConfig.__class_validators__": [],
}
_ABSENT = {"torch.npu", "torch.hpu", "torch.version.musa", "torch.musa"}
_FINDER = None


def _infer_schema(fn) -> str:
    """torch.library.infer_schema, as far as vLLM's IR op registry reads it: one Tensor output per Tensor in
    the return annotation (vllm/ir/op.py splits on " -> " and counts them)."""
    import inspect

    ret = inspect.signature(fn).return_annotation
    n = str(ret).count("Tensor")
    return "() -> " + ("Tensor" if n == 1 else "(" + ", ".join(["Tensor"] * n) + ")")


def _attr(module: str, qualname: str):
    path = f"{module}.{qualname}"
    if path in _ABSENT:
        raise AttributeError(qualname)
    if path in _VALUES:
        return _VALUES[path]
    if qualname == "__version__" and _FINDER is not None:
        return _FINDER.module_version(module)
    return _stub_class(qualname, module)


class _StubLoader(importlib.abc.Loader):
    def create_module(self, spec):
        mod = _StubModule(spec.name)
        mod.__path__ = []          # a package: submodules are stubbed too
        mod.__file__ = f"<stub {spec.name}>"
        if _FINDER is not None and "." not in spec.name:
            mod.__version__ = _FINDER.module_version(spec.name)
        for path, v in _VALUES.items():
            if path.rpartition(".")[0] == spec.name:
                setattr(mod, path.rpartition(".")[2], v)
        return mod

    def exec_module(self, module):
        pass


class _StubDistribution(importlib.metadata.Distribution):
    """Package metadata of a stubbed distribution: its name and the version the wheel requires."""

    def __init__(self, name: str, version: str) -> None:
        self._meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"

    def read_text(self, filename):
        return self._meta if filename in ("METADATA", "PKG-INFO") else None

    def locate_file(self, path):
        return path


def _norm(name: str) -> str:
    return name.lower().replace("-", "_").replace(".", "_")


class StubFinder(importlib.abc.MetaPathFinder):
    """Serves STUBBED packages (and their submodules) and the wheel's compiled extensions as stubs; records
    what was stubbed. ``versions``: distribution name -> the version the wheel's requirements name (lower
    bound), answered by importlib.metadata and by the stub module's ``__version__`` (import-time version
    checks compare them)."""

    def __init__(self, extensions: set[str], versions: dict[str, str]) -> None:
        self.extensions = extensions
        self.versions = {_norm(k): v for k, v in versions.items()}
        self.used: set[str] = set()

    def module_version(self, module: str) -> str:
        top = module.split(".", 1)[0]
        dists = [d for d, m in _DIST_MODULE.items() if m == top] + [_norm(top)]
        return next((self.versions[d] for d in dists if d in self.versions), "0.0.0")

    def find_distributions(self, context=importlib.metadata.DistributionFinder.Context()):
        name = context.name
        if name is not None and _norm(name) in self.versions and _DIST_MODULE.get(_norm(name), _norm(name)) in STUBBED:
            yield _StubDistribution(name, self.versions[_norm(name)])

    def find_spec(self, fullname, path=None, target=None):
        top = fullname.split(".", 1)[0]
        if top in STUBBED or fullname in self.extensions:
            self.used.add(top if top in STUBBED else fullname)
            return importlib.machinery.ModuleSpec(fullname, _StubLoader(), is_package=True)
        return None


class _ReportMissing(importlib.abc.MetaPathFinder):
    """Last on sys.meta_path: a module nobody could import is not silently stubbed; it names itself."""

    def __init__(self, catch_all: bool) -> None:
        self.catch_all = catch_all
        self.missing: set[str] = set()

    def find_spec(self, fullname, path=None, target=None):
        top = fullname.split(".", 1)[0]
        if top in sys.stdlib_module_names or top in ("vllm", "sglang") or ("." in fullname and top not in self.missing):
            return None
        self.missing.add(top)
        if self.catch_all:   # developer aid (ENGINE_PARSERS_CATCH_ALL=1): list every missing module in one run
            return importlib.machinery.ModuleSpec(fullname, _StubLoader(), is_package=True)
        # An ImportError, as on a machine without the package: optional probes (libtpu, ...) catch it; an import
        # the parser needs fails the dump with this message.
        raise MissingModule(f"module {fullname!r} is neither installed in the tools venv nor stubbed: add it to "
                            "stubs.STUBBED with the reason the parser does not need it (or to requirements.txt)")


def install(extensions: set[str] = frozenset(), versions: dict[str, str] | None = None) -> StubFinder:
    """Put the stub finder first on sys.meta_path (a stubbed package must not be imported for real even when
    it happens to be installed: the dump must not depend on the machine). ``extensions``: dotted names of the
    wheel's compiled modules (CUDA kernels; the unpacked tree leaves them out)."""
    finder = StubFinder(set(extensions), versions or {})
    global _FINDER
    _FINDER = finder
    sys.meta_path.insert(0, finder)
    finder.report = _ReportMissing(bool(os.environ.get("ENGINE_PARSERS_CATCH_ALL")))
    sys.meta_path.append(finder.report)
    return finder
