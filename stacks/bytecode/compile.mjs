// Compiles every Python module under a directory to bytecode for the Python that Pyodide embeds (CPython built
// for WebAssembly: the same compiler, magic number and cache tag as the native interpreter of that version).
// Usage: node compile.mjs <directory> <expected python version, e.g. 3.14>
import { loadPyodide } from "pyodide";

const [directory, expected] = process.argv.slice(2);
if (!directory || !expected) {
  console.error("usage: node compile.mjs <directory> <python version>");
  process.exit(2);
}
const pyodide = await loadPyodide();
pyodide.mountNodeFS("/bundle", directory);
pyodide.globals.set("expected", expected);
try {
  const tag = pyodide.runPython(`
import compileall, py_compile, sys, warnings

version = f"{sys.version_info.major}.{sys.version_info.minor}"
if version != expected:
    raise RuntimeError(f"Pyodide embeds Python {version}, not {expected}: pin the pyodide release for {expected}")
# Third-party sources may warn (invalid escapes, return in finally): the bundle only needs their bytecode.
warnings.simplefilter("ignore")
# Unchecked hash-based pycs: the runtime loads them without comparing them with the source (mtime or hash).
if not compileall.compile_dir(
    "/bundle", quiet=1, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH, workers=1
):
    raise RuntimeError("some modules did not compile (listed above)")
sys.implementation.cache_tag
`);
  console.log(`compiled for ${tag}`);
} catch (error) {
  // The last line of a Python traceback says what went wrong; the rest is the interpreter's own frames.
  console.error(String(error.message).trim().split("\n").at(-1));
  process.exit(1);
}
