"""Capture a conformance data set from the real PlaidML 0.7.0.

This script runs ONLY inside a PlaidML venv (python 3.7, plaidml==0.7.0,
plaidml-keras==0.7.0, keras 2.2.4); it is never imported by the test suite.
It builds small graphs with PlaidML's own op builders (``plaidml.op.*`` and
the Keras backend ``plaidml.keras.backend``), then evaluates every
``tile.Operation`` in the graph *one program at a time*: each Operation's Tile
code (one ``function (...) -> (...) { ... }``) is compiled on its own with
``plaidml.Function``, fed concrete inputs through a ``plaidml.Invoker`` and
its outputs are read back.  Each program is written with its inputs and
PlaidML's outputs to ``plaidml_0.7.0/<family>.jsonl`` next to this file.

Run (see tests/conformance/README.md)::

    /root/.pyenv/versions/3.7.16/bin/python3 -m venv /work/plaidml-venv
    /work/plaidml-venv/bin/pip install plaidml==0.7.0 plaidml-keras==0.7.0
    cd tests/conformance
    PLAIDML_EXPERIMENTAL=1 PLAIDML_DEVICE_IDS=llvm_cpu.0 \\
        /work/plaidml-venv/bin/python capture_plaidml.py

Everything is seeded (per case, from a CRC of the case name), so running it
again produces byte-identical files.
"""
from __future__ import print_function

import collections
import json
import math
import os
import re
import sys
import traceback
import zlib

os.environ.setdefault('PLAIDML_EXPERIMENTAL', '1')
os.environ.setdefault('PLAIDML_DEVICE_IDS', 'llvm_cpu.0')
os.environ.setdefault('KERAS_BACKEND', 'plaidml.keras.backend')

import numpy as np  # noqa: E402
import plaidml  # noqa: E402
import plaidml.op as op  # noqa: E402
import plaidml.tile as tile  # noqa: E402

plaidml.quiet()
import plaidml.keras  # noqa: E402
plaidml.keras.install_backend()
import keras.backend as K  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.join(HERE, 'plaidml_0.7.0')
MAX_ELEMS = 2000
six_int_types = (int,)

# ---------------------------------------------------------------------------
# plumbing: remember the Python value of scalar vars
# ---------------------------------------------------------------------------

_orig_int_init = plaidml.Integer.__init__
_orig_real_init = plaidml.Real.__init__


def _int_init(self, value):
    self.py_value = int(value)
    _orig_int_init(self, value)


def _real_init(self, value):
    self.py_value = float(value)
    _orig_real_init(self, value)


plaidml.Integer.__init__ = _int_init
plaidml.Real.__init__ = _real_init

_ctx = plaidml.Context()
_dev = plaidml.Device(_ctx, plaidml.devices(_ctx, limit=10)[0])

_NP_OF = {
    plaidml.DType.BOOLEAN: 'bool',
    plaidml.DType.INT8: 'int8',
    plaidml.DType.INT16: 'int16',
    plaidml.DType.INT32: 'int32',
    plaidml.DType.INT64: 'int64',
    plaidml.DType.UINT8: 'uint8',
    plaidml.DType.UINT16: 'uint16',
    plaidml.DType.UINT32: 'uint32',
    plaidml.DType.UINT64: 'uint64',
    plaidml.DType.FLOAT16: 'float16',
    plaidml.DType.FLOAT32: 'float32',
    plaidml.DType.FLOAT64: 'float64',
}


class Scalar(object):
    """A Tile scalar input (plaidml.Integer -> int64, plaidml.Real -> float64)."""

    def __init__(self, value):
        self.value = value
        self.dtype = 'int64' if isinstance(value, int) else 'float64'


class Skip(Exception):
    pass


def _to_tensor(arr):
    arr = np.ascontiguousarray(arr)
    dt = tile.convert_np_dtype_to_pml(arr.dtype.name)
    t = plaidml.Tensor(_dev, plaidml.Shape(_ctx, dt, *arr.shape))
    with t.mmap_discard(_ctx) as view:
        view.copy_from_ndarray(arr)
        view.writeback()
    return t


def _read_tensor(t, dtype=None, dims=None):
    shape = t.shape
    if dtype is None:
        dtype = shape.dtype
    if dims is None:
        dims = tuple(d.size for d in shape.dimensions)
    if dtype not in _NP_OF:
        raise Skip('cannot read dtype {}'.format(dtype))
    with t.mmap_current() as view:
        flat = np.array([view[i] for i in range(len(view))], dtype=_NP_OF[dtype]) \
            if dtype == plaidml.DType.FLOAT16 else np.array(view.as_ndarray(), copy=True)
    return np.asarray(flat, dtype=_NP_OF[dtype]).reshape(dims)


class Crash(Exception):
    pass


def run_program(code, inputs, output_names):
    """Run in a forked child: PlaidML aborts the whole process on some LLVM errors."""
    import pickle
    import select
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        try:
            res = ('ok', _run_program(code, inputs, output_names))
        except Skip as e:
            res = ('skip', str(e))
        except Exception as e:  # noqa
            res = ('err', '{}: {}'.format(type(e).__name__, str(e).strip()))
        data = pickle.dumps(res)
        with os.fdopen(wfd, 'wb') as fh:
            fh.write(data)
        os._exit(0)
    os.close(wfd)
    chunks = []
    with os.fdopen(rfd, 'rb') as fh:
        while True:
            ready, _, _ = select.select([fh], [], [], 120)
            if not ready:
                os.kill(pid, 9)
                break
            chunk = fh.read1(1 << 20) if hasattr(fh, 'read1') else fh.read()
            if not chunk:
                break
            chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    if not chunks:
        raise Crash('PlaidML process died (wait status {})'.format(status))
    kind, val = pickle.loads(b''.join(chunks))
    if kind == 'ok':
        return val
    if kind == 'skip':
        raise Skip(val)
    raise Crash(val)


def _run_program(code, inputs, output_names):
    """Compile ``code`` alone and run it on ``inputs`` (name -> ndarray | Scalar)."""
    func = plaidml.Function(code)
    inv = plaidml.Invoker(_ctx, func)
    keep = []
    for name, val in inputs.items():
        if isinstance(val, Scalar):
            var = plaidml.Integer(val.value) if val.dtype == 'int64' else plaidml.Real(val.value)
        else:
            var = _to_tensor(val)
        keep.append(var)
        inv.set_input(name, var)
    outs = collections.OrderedDict()
    tensors = {}
    for name in output_names:
        shp = inv.get_output_shape(name)
        if shp.dtype == plaidml.DType.PRNG:
            raise Skip('PRNG-typed output')
        t = plaidml.Tensor(_dev, shp)
        tensors[name] = (t, shp)
        inv.set_output(name, t)
    inv.invoke()
    for name in output_names:
        t, shp = tensors[name]
        outs[name] = _read_tensor(t, shp.dtype, tuple(d.size for d in shp.dimensions))
    return outs


# ---------------------------------------------------------------------------
# graph evaluation, one Operation at a time
# ---------------------------------------------------------------------------


class Recorder(object):

    def __init__(self):
        self.programs = collections.OrderedDict()  # key -> record
        self.failures = []
        self.seen_keys = set()

    def reset_case(self, case, family):
        self.case = case
        self.family = family
        self.cache = {}
        self.counter = 0

    def value(self, v):
        """Concrete value of a tile Value / _ShapelessValue / var."""
        if isinstance(v, bool):
            raise Skip('bool python var')
        if isinstance(v, six_int_types):
            return Scalar(int(v))
        if isinstance(v, float):
            return Scalar(v)
        if isinstance(v, plaidml.Integer):
            return Scalar(v.py_value)
        if isinstance(v, plaidml.Real):
            return Scalar(v.py_value)
        if isinstance(v, plaidml.Tensor):
            return _read_tensor(v)
        if v.var is not None:
            return self.value(v.var)
        opn = v.source.op
        return self.run_op(opn)[v.source.output_name]

    def run_op(self, opn):
        if id(opn) in self.cache:
            res = self.cache[id(opn)]
            if isinstance(res, Exception):
                raise res
            return res
        try:
            res = self._run_op(opn)
        except Exception as e:  # noqa
            self.cache[id(opn)] = e
            raise
        self.cache[id(opn)] = res
        return res

    def _run_prng(self, vop):
        """prng_step's result is opaque (PRNG-typed); fuse step + value + state into one program."""
        sop = vop.inputs['I'].source.op
        m = re.match(r'function \((.*?)\) -> \(O\) \{ O = (prng_step\(.*?\)); \}$', sop.code.strip())
        if not m:
            raise Skip('unexpected prng_step code')
        ren = {'I': 'STATE'}
        for k in sop.inputs:
            if k != 'I':
                ren[k] = 'S' + k
        sub = lambda text: re.sub(r'\b({})\b'.format('|'.join(ren)), lambda mm: ren[mm.group(1)], text)
        sparams, sexpr = sub(m.group(1)), sub(m.group(2))
        vm = re.match(r'\s*function \((.*?)\) -> \(O\) \{(.*)\}\s*$', vop.code, re.S)
        vparams = [x.strip() for x in vm.group(1).split(',') if x.strip() != 'I']
        body = vm.group(2).replace('prng_value(I)', 'prng_value(T)')
        code = 'function ({}) -> (O, N) {{\n  T = {};\n  N = prng_state(T);\n {}}}'.format(
            ', '.join([sparams] + vparams), sexpr, body.rstrip() + '\n')
        inputs = collections.OrderedDict()
        for k in sorted(sop.inputs):
            inputs[ren[k]] = self.value(sop.inputs[k])
        for k in sorted(vop.inputs):
            if k != 'I':
                inputs[k] = self.value(vop.inputs[k])
        self.counter += 1
        pname = '{}#{}:Prng'.format(self.case, self.counter)
        try:
            outs = run_program(code, inputs, ['O', 'N'])
        except Skip:
            raise
        except Exception as e:  # noqa
            rec = _record(pname, self.family, code, inputs, None)
            rec['error'] = '{}: {}'.format(type(e).__name__, str(e).strip())
            self.failures.append(rec)
            raise Skip('PlaidML failed: {}'.format(e))
        self.programs[pname] = _record(pname, self.family, code, inputs, outs)
        return {'O': outs['O']}

    def _run_op(self, opn):
        if isinstance(opn, tile._NDArray):
            return {'O': opn._value}
        if opn.name == 'PrngValue':
            return self._run_prng(opn)
        if type(opn).bind is not tile.Operation.bind:
            raise Skip('custom bind: {}'.format(type(opn).__name__))
        if not opn.code:
            raise Skip('no code: {}'.format(type(opn).__name__))
        inputs = collections.OrderedDict()
        for name in sorted(opn.inputs):
            inputs[name] = self.value(opn.inputs[name])
        for name, _ in opn.side_effects:
            pass
        out_names = list(opn.outputs.keys())
        self.counter += 1
        pname = '{}#{}:{}'.format(self.case, self.counter, opn.name)
        key = (opn.code, tuple((n, _sig(v)) for n, v in inputs.items()))
        try:
            outs = run_program(opn.code, inputs, out_names)
        except Skip:
            raise
        except Exception as e:  # noqa
            if key not in self.seen_keys:
                self.seen_keys.add(key)
                rec = _record(pname, self.family, opn.code, inputs, None)
                rec['error'] = '{}: {}'.format(type(e).__name__, str(e).strip())
                self.failures.append(rec)
            raise Skip('PlaidML failed: {}'.format(e))
        if key not in self.seen_keys:
            self.seen_keys.add(key)
            too_big = any(_size(v) > MAX_ELEMS for v in list(inputs.values()) + list(outs.values()))
            if not too_big or opn.name.startswith('Prng'):
                self.programs[pname] = _record(pname, self.family, opn.code, inputs, outs)
        return outs


def _size(v):
    return 1 if isinstance(v, Scalar) else int(np.asarray(v).size)


def _sig(v):
    if isinstance(v, Scalar):
        return ('scalar', v.dtype, v.value)
    return (v.dtype.name, v.shape)


def _enc_float(x):
    x = float(x)
    if math.isnan(x):
        return 'nan'
    if math.isinf(x):
        return 'inf' if x > 0 else '-inf'
    return x


def _enc(v):
    if isinstance(v, Scalar):
        data = [_enc_float(v.value)] if v.dtype == 'float64' else [v.value]
        return collections.OrderedDict([('dtype', v.dtype), ('shape', []), ('kind', 'scalar'),
                                        ('data', data)])
    arr = np.asarray(v)
    flat = arr.reshape(-1)
    if arr.dtype.kind == 'f':
        data = [_enc_float(x) for x in flat.tolist()]
    elif arr.dtype.kind == 'b':
        data = [bool(x) for x in flat.tolist()]
    else:
        data = [int(x) for x in flat.tolist()]
    return collections.OrderedDict([('dtype', arr.dtype.name), ('shape', list(arr.shape)),
                                    ('kind', 'tensor'), ('data', data)])


def _record(name, family, code, inputs, outs):
    rec = collections.OrderedDict()
    rec['name'] = name
    rec['family'] = family
    rec['code'] = code
    rec['inputs'] = collections.OrderedDict((k, _enc(v)) for k, v in inputs.items())
    if outs is not None:
        rec['outputs'] = collections.OrderedDict((k, _enc(v)) for k, v in outs.items())
    return rec


# ---------------------------------------------------------------------------
# input data
# ---------------------------------------------------------------------------


class Data(object):
    """Deterministic input arrays for one case."""

    def __init__(self, case):
        self.rng = np.random.RandomState(zlib.crc32(case.encode()) & 0xffffffff)

    def f(self, *shape):
        return self.rng.standard_normal(shape).astype('float32')

    def pos(self, *shape):
        return (np.abs(self.rng.standard_normal(shape)) + 0.1).astype('float32')

    def unit(self, *shape):  # in (0, 1)
        return self.rng.uniform(0.05, 0.95, shape).astype('float32')

    def i(self, *shape, **kw):
        lo, hi = kw.get('lo', -5), kw.get('hi', 5)
        dtype = kw.get('dtype', 'int32')
        return self.rng.randint(lo, hi + 1, shape).astype(dtype)

    def b(self, *shape):
        return self.rng.randint(0, 2, shape).astype('bool')

    def typed(self, dtype, *shape):
        if dtype in ('float32', 'float64', 'float16'):
            return self.f(*shape).astype(dtype)
        if dtype == 'bool':
            return self.b(*shape)
        if dtype.startswith('uint'):
            return self.i(*shape, lo=0, hi=9, dtype=dtype)
        return self.i(*shape, dtype=dtype)


def T(arr):
    """An input Value backed by a numpy array (a tile._NDArray op)."""
    return tile.Value.from_python_value(np.asarray(arr))


# ---------------------------------------------------------------------------
# cases
# ---------------------------------------------------------------------------

CASES = []  # (family, name, builder(Data) -> list of Values)


def case(family, name, fn):
    CASES.append((family, name, fn))


# ---- cases -----------------------------------------------------------------
# Each builder receives a seeded Data and returns the Values to evaluate; every
# Operation reachable from them is captured as its own program.

F32, I32 = 'float32', 'int32'
SHAPES = [(5,), (3, 4), (2, 3, 4)]


def _shape_name(s):
    return 'x'.join(str(x) for x in s) if s else 'scalar'


# elementwise unary math (float)
_UNARY_F = {
    'abs': lambda x: K.abs(x), 'exp': K.exp, 'sin': K.sin, 'cos': K.cos, 'tanh': K.tanh,
    'sigmoid': K.sigmoid, 'softplus': K.softplus, 'softsign': K.softsign, 'square': K.square,
    'sign': K.sign, 'round': K.round, 'floor': K.floor, 'ceil': K.ceil, 'neg': lambda x: -x,
    'hard_sigmoid': K.hard_sigmoid, 'elu': K.elu, 'elu_a0.5': lambda x: K.elu(x, 0.5),
    'relu': K.relu, 'relu_alpha': lambda x: K.relu(x, alpha=0.1),
    'relu_max': lambda x: K.relu(x, max_value=0.5),
    'relu_thr': lambda x: K.relu(x, threshold=0.3),
    'relu_all': lambda x: K.relu(x, alpha=0.2, max_value=1.0, threshold=-0.5),
    'pow2': lambda x: K.pow(x, 2), 'pow3': lambda x: K.pow(x, 3.0),
    'clip': lambda x: K.clip(x, -0.5, 0.7), 'identity': K.identity,
    'tanh_op': op.tanh, 'stop_gradient': K.stop_gradient, 'pos': lambda x: +x,
    'rsub_scalar': lambda x: 1.5 - x, 'rdiv_scalar': lambda x: 2.0 / x,
    'mul_int_scalar': lambda x: x * 3, 'add_int_scalar': lambda x: x + 2,
    'sub_scalar': lambda x: x - 0.25, 'div_scalar': lambda x: x / 4.0,
}
_UNARY_POS = {'log': K.log, 'sqrt': K.sqrt, 'pow_half': lambda x: K.pow(x, 0.5),
              'pow_neg': lambda x: K.pow(x, -1.5), 'sqrt_op': op.sqrt}
for _s in SHAPES[:2] + [(2, 2, 2, 3)]:
    for _n, _f in sorted(_UNARY_F.items()):
        case('unary', 'unary_{}_f32_{}'.format(_n, _shape_name(_s)),
             lambda d, f=_f, s=_s: [f(T(d.f(*s) * 2))])
    for _n, _f in sorted(_UNARY_POS.items()):
        case('unary', 'unary_{}_f32_{}'.format(_n, _shape_name(_s)),
             lambda d, f=_f, s=_s: [f(T(d.pos(*s)))])
# special float values
case('unary', 'unary_log_sqrt_special', lambda d: [
    K.log(T(np.array([0.0, -1.0, 1.0, np.inf], 'float32'))),
    K.sqrt(T(np.array([0.0, -1.0, 4.0, np.inf], 'float32'))),
    K.exp(T(np.array([-np.inf, 100.0, 0.0, np.nan], 'float32')))])
# integer unary
_UNARY_I = {'abs': lambda x: K.abs(x), 'neg': lambda x: -x, 'square': K.square,
            'sign': K.sign, 'relu': K.relu, 'clip': lambda x: K.clip(x, -2, 3),
            'invert': lambda x: ~x, 'mul3': lambda x: x * 3, 'rsub': lambda x: 7 - x,
            'div2': lambda x: x / 2, 'floordiv2': lambda x: x // 2, 'rdiv': lambda x: 12 / x,
            'shl': lambda x: x << 2, 'shr': lambda x: x >> 1, 'and3': lambda x: x & 3,
            'or4': lambda x: x | 4, 'xor5': lambda x: x ^ 5, 'mulf': lambda x: x * 1.5,
            'addf': lambda x: x + 0.5, 'exp': K.exp, 'round': K.round, 'floor': K.floor,
            'maximum0': lambda x: K.maximum(x, 0), 'minimum1': lambda x: K.minimum(x, 1)}
for _dt in ['int32', 'int8', 'uint8', 'int16', 'uint32']:
    for _n, _f in sorted(_UNARY_I.items()):
        def _ui(d, f=_f, dt=_dt):
            x = d.typed(dt, 3, 4)
            return [f(T(np.where(x == 0, np.ones_like(x), x)))]
        case('unary_int', 'unary_{}_{}_3x4'.format(_n, _dt), _ui)

# binary arithmetic with dtype combinations and broadcasting
_BIN = {'add': lambda a, b: a + b, 'sub': lambda a, b: a - b, 'mul': lambda a, b: a * b,
        'div': lambda a, b: a / b, 'floordiv': lambda a, b: a // b,
        'maximum': K.maximum, 'minimum': K.minimum, 'pow_op': op.pow}
_BCAST = [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((2, 1, 4), (3, 1)), ((5,), ())]
for _n, _f in sorted(_BIN.items()):
    for _da, _db in [(F32, F32), (I32, I32), (I32, F32), ('int8', 'int8'), ('uint8', 'uint8'),
                     ('int8', 'int32'), ('uint8', F32), ('int16', 'int32'), (F32, 'float64')]:
        for _sa, _sb in (_BCAST if (_da, _db) in [(F32, F32), (I32, I32)] else _BCAST[:1]):
            def _b(d, f=_f, da=_da, db=_db, sa=_sa, sb=_sb, n=_n):
                a = d.typed(da, *sa)
                b = d.typed(db, *sb)
                if n in ('div', 'floordiv') or n == 'pow_op':
                    b = np.where(b == 0, np.ones_like(b), b)
                    if n == 'pow_op' and da[0] == 'f':
                        a = np.abs(a) + np.float32(0.5).astype(a.dtype)
                    if n == 'pow_op' and db[0] != 'f':
                        b = np.abs(b)
                return [f(T(a), T(b))]
            case('binary', 'bin_{}_{}_{}_{}__{}'.format(_n, _da, _db, _shape_name(_sa),
                                                       _shape_name(_sb)), _b)
# integer division / modulo semantics on negative numbers
case('binary', 'int_div_signs', lambda d: [
    T(np.array([7, -7, 7, -7, 0, 5], 'int32')) / T(np.array([2, 2, -2, -2, 3, 5], 'int32')),
    T(np.array([7, -7, 7, -7, 0, 5], 'int32')) // T(np.array([2, 2, -2, -2, 3, 5], 'int32'))])
case('binary', 'float_floordiv_signs', lambda d: [
    T(np.array([7, -7, 7, -7, 0.5, 5], 'float32')) //
    T(np.array([2, 2, -2, -2, 3, 5], 'float32'))])

# comparisons and logical ops
_CMP = {'equal': K.equal, 'not_equal': K.not_equal, 'greater': K.greater,
        'greater_equal': K.greater_equal, 'less': K.less, 'less_equal': K.less_equal}
for _n, _f in sorted(_CMP.items()):
    for _dt in [F32, I32, 'int8', 'uint8', 'bool']:
        case('compare', 'cmp_{}_{}_3x4'.format(_n, _dt),
             lambda d, f=_f, dt=_dt: [f(T(d.typed(dt, 3, 4)), T(d.typed(dt, 3, 4)))])
    case('compare', 'cmp_{}_f32_bcast'.format(_n),
         lambda d, f=_f: [f(T(d.i(3, 1).astype(F32)), T(d.i(4).astype(F32)))])
    case('compare', 'cmp_{}_i32_scalar'.format(_n), lambda d, f=_f: [f(T(d.i(3, 4)), 1)])
    case('compare', 'cmp_{}_f32_scalar'.format(_n), lambda d, f=_f: [f(T(d.f(3, 4)), 0.25)])
    case('compare', 'cmp_{}_i32_f32'.format(_n),
         lambda d, f=_f: [f(T(d.i(3, 4)), T(d.i(3, 4).astype(F32)))])
for _n, _f in [('and', lambda a, b: a & b), ('or', lambda a, b: a | b),
               ('xor', lambda a, b: a ^ b)]:
    for _dt in ['bool', I32, 'uint8']:
        case('logical', 'logic_{}_{}'.format(_n, _dt),
             lambda d, f=_f, dt=_dt: [f(T(d.typed(dt, 3, 4)), T(d.typed(dt, 3, 4)))])
case('logical', 'logic_not_bool', lambda d: [~T(d.b(3, 4))])
case('logical', 'logic_cmp_and', lambda d: [(T(d.f(3, 4)) > 0) & (T(d.f(3, 4)) < 0.5)])
for _n, _f in [('all', K.all), ('any', K.any)]:
    for _ax in [None, 0, 1, -1]:
        for _kd in [False, True]:
            for _dt in ['bool', I32, F32]:
                case('logical', 'logic_{}_{}_ax{}_kd{}'.format(_n, _dt, _ax, int(_kd)),
                     lambda d, f=_f, ax=_ax, kd=_kd, dt=_dt: [
                         f(T(d.typed(dt, 3, 4) if dt != F32 else d.i(3, 4, lo=0, hi=2)
                             .astype(F32)), axis=ax, keepdims=kd)])
for _dt in [F32, I32, 'bool']:
    case('logical', 'switch_{}'.format(_dt), lambda d, dt=_dt: [
        K.switch(T(d.b(3, 4)), T(d.typed(dt, 3, 4)), T(d.typed(dt, 3, 4)))])
case('logical', 'switch_cond_f32', lambda d: [
    K.switch(T(d.f(3, 4)) > 0, T(d.f(3, 4)), T(d.f(3, 4)))])

# casts
_DTS = ['float32', 'float64', 'float16', 'int8', 'int16', 'int32', 'int64', 'uint8', 'uint16',
        'uint32', 'bool']
for _a in _DTS:
    for _b in _DTS:
        if _a == _b:
            continue

        def _c(d, a=_a, b=_b):
            if a[0] == 'f':
                x = (d.f(3, 4) * 4)
                x[0, :] = [-1.5, -0.5, 0.5, 2.5]
                x = x.astype(a)
            else:
                x = d.typed(a, 3, 4)
            return [K.cast(T(x), b)]
        case('cast', 'cast_{}_to_{}'.format(_a, _b), _c)
case('cast', 'cast_f32_to_u8_negative_and_large', lambda d: [
    K.cast(T(np.array([-3.7, -1.0, 0.0, 1.9, 255.0, 300.5], 'float32')), 'uint8'),
    K.cast(T(np.array([-3.7, -1.0, 0.0, 1.9, 127.0, 200.5], 'float32')), 'int8'),
    K.cast(T(np.array([-300, -129, -1, 0, 255, 256, 1000], 'int32')), 'uint8'),
    K.cast(T(np.array([-300, -129, -1, 0, 255, 256, 1000], 'int32')), 'int8'),
    K.cast(T(np.array([-3.7, 0.0, 0.2, np.nan], 'float32')), 'bool')])

# reductions
_RED = {'sum': K.sum, 'mean': K.mean, 'prod': K.prod, 'max': K.max, 'min': K.min,
        'var': K.var, 'std': K.std, 'logsumexp': K.logsumexp}
for _n, _f in sorted(_RED.items()):
    for _s, _axes in [((5,), [None, 0, -1]), ((3, 4), [None, 0, 1, -1, [0, 1]]),
                      ((2, 3, 4), [None, 1, -1, [0, 2], [-1, 0], (1, 2)])]:
        for _ax in _axes:
            for _kd in [False, True]:
                for _dt in ([F32, I32, 'int8', 'uint8'] if _ax in (None, 1) else [F32]):
                    if _dt != F32 and _n in ('var', 'std', 'logsumexp'):
                        continue

                    def _r(d, f=_f, s=_s, ax=_ax, kd=_kd, dt=_dt, n=_n):
                        x = d.typed(dt, *s) if n != 'prod' else d.i(*s, lo=1, hi=3).astype(dt)
                        if n == 'prod' and dt == F32:
                            x = d.f(*s)
                        return [f(T(x), axis=ax, keepdims=kd)]
                    case('reduce', 'red_{}_{}_{}_ax{}_kd{}'.format(
                        _n, _dt, _shape_name(_s), str(_ax).replace(' ', ''), int(_kd)), _r)
for _n, _f in [('argmax', K.argmax), ('argmin', K.argmin)]:
    for _s, _axes in [((5,), [0, -1]), ((3, 4), [0, 1, -1]), ((2, 3, 4), [0, 1, 2, -1])]:
        for _ax in _axes:
            for _dt in [F32, I32]:
                case('reduce', '{}_{}_{}_ax{}'.format(_n, _dt, _shape_name(_s), _ax),
                     lambda d, f=_f, s=_s, ax=_ax, dt=_dt: [f(T(d.typed(dt, *s)), axis=ax)])
case('reduce', 'argmax_ties', lambda d: [K.argmax(T(np.array([[1, 3, 3, 0], [2, 2, 2, 2]],
                                                                'float32')), axis=-1)])
for _ax in [None, 0, [0, 1]]:
    for _kd in [False, True]:
        case('reduce', 'op_mean_int_floatx_ax{}_kd{}'.format(_ax, int(_kd)),
             lambda d, ax=_ax, kd=_kd: [op.mean(T(d.i(3, 4)), axes=ax, keepdims=kd)])
        case('reduce', 'op_summation_ax{}_kd{}'.format(_ax, int(_kd)),
             lambda d, ax=_ax, kd=_kd: [op.summation(T(d.i(3, 4, dtype='int8')), axes=ax,
                                                     keepdims=kd)])
        case('reduce', 'op_max_reduce_ax{}_kd{}'.format(_ax, int(_kd)),
             lambda d, ax=_ax, kd=_kd: [op.max_reduce(T(d.f(3, 4)), axes=ax, keepdims=kd)])
        case('reduce', 'op_min_reduce_ax{}_kd{}'.format(_ax, int(_kd)),
             lambda d, ax=_ax, kd=_kd: [op.min_reduce(T(d.f(3, 4)), axes=ax, keepdims=kd)])
        case('reduce', 'op_variance_ax{}_kd{}'.format(_ax, int(_kd)),
             lambda d, ax=_ax, kd=_kd: [op.variance(T(d.f(3, 4)), axes=ax, keepdims=kd)])
for _ax in [0, 1, -1]:
    for _dt in [F32, I32]:
        case('reduce', 'cumsum_{}_ax{}'.format(_dt, _ax),
             lambda d, ax=_ax, dt=_dt: [K.cumsum(T(d.typed(dt, 3, 4)), axis=ax)])
        case('reduce', 'cumprod_{}_ax{}'.format(_dt, _ax),
             lambda d, ax=_ax, dt=_dt: [K.cumprod(T(d.i(3, 4, lo=-2, hi=2).astype(dt)),
                                                  axis=ax)])
case('reduce', 'cumsum_1d', lambda d: [K.cumsum(T(d.f(7)), axis=0)])
case('reduce', 'cumsum_3d_ax1', lambda d: [K.cumsum(T(d.f(2, 3, 4)), axis=1)])

# softmax & friends
for _s in [(5,), (3, 4), (2, 3, 4)]:
    case('nn', 'softmax_{}'.format(_shape_name(_s)), lambda d, s=_s: [K.softmax(T(d.f(*s)))])
    for _ax in [None, 0, -1]:
        case('nn', 'op_softmax_{}_ax{}'.format(_shape_name(_s), _ax),
             lambda d, s=_s, ax=_ax: [op.softmax(T(d.f(*s)), axis=ax)])
        case('nn', 'op_log_softmax_{}_ax{}'.format(_shape_name(_s), _ax),
             lambda d, s=_s, ax=_ax: [op.log_softmax(T(d.f(*s)), axis=ax)])
    case('nn', 'hardmax_{}'.format(_shape_name(_s)), lambda d, s=_s: [op.hardmax(T(d.f(*s)))])
    case('nn', 'ismax_{}'.format(_shape_name(_s)),
         lambda d, s=_s: [op.ismax(T(d.f(*s)), axes=[len(s) - 1])])
for _ax in [0, 1, -1, [0, 1]]:
    case('nn', 'l2_normalize_ax{}'.format(_ax),
         lambda d, ax=_ax: [K.l2_normalize(T(d.f(3, 4)), axis=ax)])
for _fl in [False, True]:
    case('nn', 'binary_crossentropy_logits{}'.format(int(_fl)), lambda d, fl=_fl: [
        K.binary_crossentropy(T(d.i(3, 4, lo=0, hi=1).astype(F32)),
                              T(d.f(3, 4) if fl else d.unit(3, 4)), from_logits=fl)])
    for _s in [(5,), (3, 4), (2, 3, 4)]:
        case('nn', 'categorical_crossentropy_logits{}_{}'.format(int(_fl), _shape_name(_s)),
             lambda d, fl=_fl, s=_s: [K.categorical_crossentropy(
                 T(np.eye(s[-1], dtype=F32)[d.i(*s[:-1] or (1,), lo=0, hi=s[-1] - 1)]
                   .reshape(s)),
                 T(d.f(*s) if fl else d.unit(*s)), from_logits=fl)])
    case('nn', 'sparse_categorical_crossentropy_logits{}'.format(int(_fl)),
         lambda d, fl=_fl: [K.sparse_categorical_crossentropy(
             T(d.i(3, lo=0, hi=3).astype(F32)), T(d.f(3, 4) if fl else d.unit(3, 4)),
             from_logits=fl)])
case('nn', 'op_binary_crossentropy_eps', lambda d: [
    op.binary_crossentropy(T(d.i(3, 4, lo=0, hi=1).astype(F32)), T(d.unit(3, 4)), 1e-7)])
for _ax in [-1, 1]:
    case('nn', 'bias_add_cl_ax{}'.format(_ax), lambda d: [
        K.bias_add(T(d.f(2, 3, 4)), T(d.f(4)), data_format='channels_last')])
case('nn', 'bias_add_cf_4d', lambda d: [
    K.bias_add(T(d.f(2, 3, 4, 5)), T(d.f(3)), data_format='channels_first')])
case('nn', 'bias_add_cl_4d', lambda d: [
    K.bias_add(T(d.f(2, 3, 4, 5)), T(d.f(5)), data_format='channels_last')])
case('nn', 'batch_normalization', lambda d: [
    K.batch_normalization(T(d.f(2, 3, 4)), T(d.f(4)), T(d.pos(4)), T(d.f(4)), T(d.f(4)))])
for _axes in [[0], [0, 1]]:
    def _nb(d, axes=_axes):
        return list(K.normalize_batch_in_training(T(d.f(2, 3, 4)), T(d.pos(4)), T(d.f(4)),
                                                  axes))
    case('nn', 'normalize_batch_in_training_{}'.format(len(_axes)), _nb)

# dot / matmul / batch_dot
for _sa, _sb in [((3, 4), (4, 5)), ((4,), (4, 3)), ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)),
                 ((2, 3, 4), (2, 4, 5)), ((5,), (5,))]:
    for _dt in [F32, I32]:
        case('linalg', 'dot_{}_{}__{}'.format(_dt, _shape_name(_sa), _shape_name(_sb)),
             lambda d, sa=_sa, sb=_sb, dt=_dt: [K.dot(T(d.typed(dt, *sa)), T(d.typed(dt, *sb)))])
for _sa, _sb, _ax in [((2, 3, 4), (2, 4, 5), None), ((2, 3, 4), (2, 4, 5), (2, 1)),
                      ((2, 3), (2, 3), 1), ((2, 3), (2, 3), None), ((2, 3, 4), (2, 3, 5), (1, 1)),
                      ((2, 4, 3), (2, 5, 4), (1, 2)), ((2, 3, 4), (2, 4), (2, 1)),
                      ((2, 3, 4, 5), (2, 5, 2), (3, 1))]:
    case('linalg', 'batch_dot_{}__{}_ax{}'.format(_shape_name(_sa), _shape_name(_sb),
                                                  str(_ax).replace(' ', '')),
         lambda d, sa=_sa, sb=_sb, ax=_ax: [K.batch_dot(T(d.f(*sa)), T(d.f(*sb)), axes=ax)])
for _sa, _sb in [((3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)), ((2, 3, 4), (4, 5)), ((4,), (4, 3)),
                 ((3, 4), (4,))]:
    case('linalg', 'matmul_{}__{}'.format(_shape_name(_sa), _shape_name(_sb)),
         lambda d, sa=_sa, sb=_sb: [op.matmul(T(d.f(*sa)), T(d.f(*sb)))])
for _ta in [False, True]:
    for _tb in [False, True]:
        for _al, _be in [(None, None), (0.5, 2.0)]:
            def _g(d, ta=_ta, tb=_tb, al=_al, be=_be):
                a = d.f(4, 3) if ta else d.f(3, 4)
                b = d.f(5, 4) if tb else d.f(4, 5)
                return [op.gemm(T(a), T(b), T(d.f(5)), alpha=al, beta=be, transA=ta, transB=tb)]
            case('linalg', 'gemm_tA{}_tB{}_ab{}'.format(int(_ta), int(_tb), _al), _g)
case('linalg', 'transpose_2d', lambda d: [K.transpose(T(d.f(3, 4)))])
case('linalg', 'transpose_3d', lambda d: [K.transpose(T(d.f(2, 3, 4)))])
case('linalg', 'eye_3', lambda d: [K.eye(3) + T(d.f(3, 3))])

# shape manipulation
for _s, _ns in [((3, 4), (4, 3)), ((3, 4), (12,)), ((3, 4), (-1,)), ((2, 3, 4), (6, -1)),
                ((2, 3, 4), (2, 12)), ((12,), (2, 2, 3)), ((2, 3, 4), (4, 3, 2)),
                ((2, 3, 4), (-1, 4)), ((2, 3, 4), (1, 24, 1)), ((6,), (1, 6))]:
    for _dt in [F32, I32]:
        case('shape', 'reshape_{}_{}_to_{}'.format(_dt, _shape_name(_s),
                                                   _shape_name(_ns).replace('-', 'm')),
             lambda d, s=_s, ns=_ns, dt=_dt: [K.reshape(T(d.typed(dt, *s)), ns)])
case('shape', 'reshape_0d', lambda d: [op.reshape(T(d.f(1, 1)), ())])
for _s in [(3, 4), (2, 3, 4), (2, 1, 3, 2)]:
    case('shape', 'flatten_{}'.format(_shape_name(_s)), lambda d, s=_s: [K.flatten(T(d.f(*s)))])
    case('shape', 'batch_flatten_{}'.format(_shape_name(_s)),
         lambda d, s=_s: [K.batch_flatten(T(d.f(*s)))])
for _s, _ax in [((3, 1, 4), 1), ((3, 1, 4), -2), ((1, 3), 0), ((3, 4, 1), -1)]:
    case('shape', 'squeeze_{}_ax{}'.format(_shape_name(_s), _ax),
         lambda d, s=_s, ax=_ax: [K.squeeze(T(d.f(*s)), ax)])
case('shape', 'op_squeeze_multi', lambda d: [op.squeeze(T(d.f(1, 3, 1, 4)), [0, 2])])
case('shape', 'op_unsqueeze_multi', lambda d: [op.unsqueeze(T(d.f(3, 4)), [0, 2])])
for _ax in [0, 1, 2, -1, -2]:
    case('shape', 'expand_dims_ax{}'.format(_ax),
         lambda d, ax=_ax: [K.expand_dims(T(d.f(3, 4)), ax)])
for _ax in [0, 1, -1]:
    for _dt in [F32, I32]:
        case('shape', 'stack_{}_ax{}'.format(_dt, _ax), lambda d, ax=_ax, dt=_dt: [
            K.stack([T(d.typed(dt, 3, 4)), T(d.typed(dt, 3, 4)), T(d.typed(dt, 3, 4))], axis=ax)])
for _ax in [0, 1, -1]:
    case('shape', 'concatenate_3d_ax{}'.format(_ax), lambda d, ax=_ax: [
        K.concatenate([T(d.f(2, 3, 4)), T(d.f(*[(5 if i == (ax % 3) else v) for i, v in
                                                 enumerate((2, 3, 4))]))], axis=ax)])
    case('shape', 'concatenate_2d_three_i32_ax{}'.format(_ax), lambda d, ax=_ax: [
        K.concatenate([T(d.i(2, 3)), T(d.i(2, 3)), T(d.i(2, 3))], axis=ax)])
case('shape', 'concatenate_1d', lambda d: [K.concatenate([T(d.f(3)), T(d.f(4))], axis=0)])
case('shape', 'concatenate_mixed_dtype', lambda d: [
    K.concatenate([T(d.f(2, 3)), T(d.i(2, 3))], axis=1)])
for _pat in [(1, 0), (0, 2, 1), (2, 0, 1), (1, 2, 0)]:
    _s = (3, 4) if len(_pat) == 2 else (2, 3, 4)
    case('shape', 'permute_{}'.format(''.join(map(str, _pat))),
         lambda d, s=_s, pat=_pat: [K.permute_dimensions(T(d.f(*s)), pat)])
case('shape', 'repeat_2d', lambda d: [K.repeat(T(d.f(2, 3)), 3)])
for _ax, _rep in [(0, 2), (1, 3), (-1, 2), (2, 1)]:
    case('shape', 'repeat_elements_ax{}_r{}'.format(_ax, _rep),
         lambda d, ax=_ax, rep=_rep: [K.repeat_elements(T(d.f(2, 3, 2)), rep, ax)])
for _n in [(2, 1), (1, 3), (2, 2), 2, (2, 1, 3)]:
    case('shape', 'tile_{}'.format(str(_n).replace(' ', '')),
         lambda d, n=_n: [K.tile(T(d.f(2, 3) if not isinstance(n, tuple) or len(n) == 2
                                    else d.f(2, 3, 1)), n)])
for _ax in [0, 1, -1, [0, 1], (0, 2)]:
    _s = (2, 3, 4) if _ax == (0, 2) else (3, 4)
    case('shape', 'reverse_ax{}'.format(str(_ax).replace(' ', '')),
         lambda d, s=_s, ax=_ax: [K.reverse(T(d.f(*s)), ax)])
_SLICES = [(slice(1, 3),), (slice(None, None, 2),), (slice(None, None, -1),), (1,), (-1,),
           (slice(None), 2), (slice(1, None), slice(None, -1)), (slice(-3, None, 2), 0),
           (Ellipsis, 1), (slice(3, 0, -1), slice(None, None, -2)), (slice(0, 10),),
           (slice(None), None, slice(1, 2))]
for _i, _sl in enumerate(_SLICES):
    case('shape', 'slice_{}'.format(_i), lambda d, sl=_sl: [T(d.f(5, 4))[sl]])
case('shape', 'slice_3d', lambda d: [T(d.f(3, 4, 5))[1:, ::2, -2]])
for _ax, _st, _en in [([0], [1], [3]), ([1], [-3], [-1]), ([0, 1], [0, 1], [2, 4]),
                      (None, [1, 0], [3, 2])]:
    case('shape', 'slice_tensor_{}_{}_{}'.format(_ax, _st, _en).replace(' ', ''),
         lambda d, ax=_ax, st=_st, en=_en: [op.slice_tensor(T(d.f(4, 5)), axes=ax, starts=st,
                                                            ends=en)])
case('shape', 'shape_of', lambda d: [K.shape(T(d.f(2, 3, 4)))])
case('shape', 'int_from_shape', lambda d: [K.cast(K.shape(T(d.f(2, 3, 4)))[1], 'float32')
                                           * T(d.f(3))])

# gather / one_hot / arange
for _ds, _is in [((5,), (3,)), ((5, 3), (4,)), ((5, 3), (2, 2)), ((4, 2, 3), (3,)),
                 ((5,), (2, 3))]:
    for _dt in [F32, I32]:
        case('gather', 'gather_{}_{}__{}'.format(_dt, _shape_name(_ds), _shape_name(_is)),
             lambda d, ds=_ds, is_=_is, dt=_dt: [K.gather(
                 T(d.typed(dt, *ds)), T(d.i(*is_, lo=0, hi=ds[0] - 1)))])
case('gather', 'gather_oob_idx', lambda d: [K.gather(T(d.f(4, 2)), T(np.array([0, 3, 4, -1, 9],
                                                                                'int32')))])
case('gather', 'gather_float_idx', lambda d: [K.gather(T(d.f(4, 2)), T(np.array([0.0, 2.7, 1.2],
                                                                                   'float32')))])
for _s, _nc in [((4,), 3), ((2, 3), 4), ((5,), 5)]:
    case('gather', 'one_hot_{}_{}'.format(_shape_name(_s), _nc),
         lambda d, s=_s, nc=_nc: [K.one_hot(T(d.i(*s, lo=0, hi=nc - 1)), nc)])
case('gather', 'one_hot_oob', lambda d: [K.one_hot(T(np.array([-1, 0, 2, 3], 'int32')), 3)])
for _a in [(5,), (2, 7), (1, 10, 3), (0.5, 3.0, 0.5)]:
    case('gather', 'arange_{}'.format('_'.join(map(str, _a))),
         lambda d, a=_a: [K.arange(*a) * 1])
case('gather', 'arange_f32', lambda d: [K.arange(2, 9, 2, dtype='float32') + 0.5])
case('gather', 'ones_zeros_like', lambda d: [K.ones_like(T(d.f(2, 3))) + K.zeros_like(T(d.f(2, 3)))])

# padding / resize
for _p in [(1, 1), (0, 2), (2, 0)]:
    case('pad', 'temporal_padding_{}_{}'.format(*_p),
         lambda d, p=_p: [K.temporal_padding(T(d.f(2, 3, 2)), p)])
for _p in [((1, 1), (1, 1)), ((0, 1), (2, 0))]:
    for _df in ['channels_last', 'channels_first']:
        case('pad', 'spatial_2d_padding_{}_{}'.format(str(_p).replace(' ', ''), _df),
             lambda d, p=_p, df=_df: [K.spatial_2d_padding(T(d.f(1, 3, 3, 2)), p, df)])
case('pad', 'spatial_3d_padding', lambda d: [
    K.spatial_3d_padding(T(d.f(1, 2, 2, 2, 2)), ((1, 0), (0, 1), (1, 1)), 'channels_last')])
case('pad', 'spatial_3d_padding_cf', lambda d: [
    K.spatial_3d_padding(T(d.f(1, 2, 2, 2, 2)), ((1, 0), (0, 1), (1, 1)), 'channels_first')])
for _pads in [[1, 1, 1, 1], [0, 1, 2, 0], [2, 2, 0, 0]]:
    case('pad', 'reflection_padding_{}'.format(''.join(map(str, _pads))),
         lambda d, pads=_pads: [op.reflection_padding(T(d.f(1, 1, 4, 4)), pads)])
for _hf, _wf in [(2, 2), (1, 3), (3, 1)]:
    for _df in ['channels_last', 'channels_first']:
        for _ip in ['nearest', 'bilinear']:
            case('pad', 'resize_images_{}x{}_{}_{}'.format(_hf, _wf, _df, _ip),
                 lambda d, hf=_hf, wf=_wf, df=_df, ip=_ip: [
                     K.resize_images(T(d.f(1, 2, 3, 2)), hf, wf, df, interpolation=ip)])
for _df in ['channels_last', 'channels_first']:
    case('pad', 'resize_volumes_{}'.format(_df), lambda d, df=_df: [
        K.resize_volumes(T(d.f(1, 2, 2, 2, 2)), 2, 1, 2, df)])

# convolutions
def _conv_case(name, xs, ks, **kw):
    case('conv', name, lambda d: [K.conv(T(d.f(*xs)), T(d.f(*ks)), **kw)])


for _pad in ['valid', 'same']:
    for _st in [1, 2]:
        for _dil in [1, 2]:
            if _st > 1 and _dil > 1:
                continue
            for _df in ['channels_last', 'channels_first']:
                xs1 = (2, 7, 3) if _df == 'channels_last' else (2, 3, 7)
                _conv_case('conv1d_{}_s{}_d{}_{}'.format(_pad, _st, _dil, _df), xs1, (3, 3, 4),
                           strides=(_st,), padding=_pad, data_format=_df, dilation_rate=(_dil,))
                xs2 = (1, 6, 5, 2) if _df == 'channels_last' else (1, 2, 6, 5)
                for _k in [(3, 3), (2, 1), (1, 1)]:
                    _conv_case('conv2d_{}_s{}_d{}_{}_k{}{}'.format(_pad, _st, _dil, _df, *_k),
                               xs2, _k + (2, 3), strides=(_st, _st), padding=_pad,
                               data_format=_df, dilation_rate=(_dil, _dil))
                xs3 = (1, 4, 4, 3, 2) if _df == 'channels_last' else (1, 2, 4, 4, 3)
                _conv_case('conv3d_{}_s{}_d{}_{}'.format(_pad, _st, _dil, _df), xs3,
                           (2, 2, 2, 2, 2), strides=(_st,) * 3, padding=_pad, data_format=_df,
                           dilation_rate=(_dil,) * 3)
case('conv', 'conv2d_strides_21', lambda d: [K.conv2d(T(d.f(1, 7, 6, 2)), T(d.f(3, 2, 2, 3)),
                                                      strides=(2, 1), padding='same',
                                                      data_format='channels_last')])
case('conv', 'conv1d_causal', lambda d: [K.conv1d(T(d.f(1, 6, 2)), T(d.f(3, 2, 2)),
                                                  padding='causal',
                                                  data_format='channels_last')])
case('conv', 'conv2d_int32', lambda d: [K.conv2d(T(d.i(1, 4, 4, 2)), T(d.i(2, 2, 2, 3)),
                                                 data_format='channels_last')])
for _pad in ['valid', 'same']:
    for _st in [1, 2]:
        for _df in ['channels_last', 'channels_first']:
            xs = (1, 5, 5, 2) if _df == 'channels_last' else (1, 2, 5, 5)
            case('conv', 'depthwise_conv2d_{}_s{}_{}'.format(_pad, _st, _df),
                 lambda d, xs=xs, pad=_pad, st=_st, df=_df: [K.depthwise_conv2d(
                     T(d.f(*xs)), T(d.f(3, 3, 2, 2)), strides=(st, st), padding=pad,
                     data_format=df)])
            case('conv', 'separable_conv2d_{}_s{}_{}'.format(_pad, _st, _df),
                 lambda d, xs=xs, pad=_pad, st=_st, df=_df: [K.separable_conv2d(
                     T(d.f(*xs)), T(d.f(3, 3, 2, 2)), T(d.f(1, 1, 4, 3)), strides=(st, st),
                     padding=pad, data_format=df)])
case('conv', 'depthwise_conv2d_dil2', lambda d: [K.depthwise_conv2d(
    T(d.f(1, 6, 6, 2)), T(d.f(2, 2, 2, 1)), dilation_rate=(2, 2), data_format='channels_last')])
# transposed convolutions: output shapes consistent with forward conv
for _pad, _st, _in, _out in [('valid', 1, 4, 6), ('valid', 2, 3, 7), ('same', 2, 3, 6),
                             ('same', 1, 4, 4)]:
    for _df in ['channels_last', 'channels_first']:
        def _ct(d, pad=_pad, st=_st, n=_in, o=_out, df=_df):
            xs = (1, n, n, 3) if df == 'channels_last' else (1, 3, n, n)
            os_ = (1, o, o, 2) if df == 'channels_last' else (1, 2, o, o)
            return [K.conv2d_transpose(T(d.f(*xs)), T(d.f(3, 3, 2, 3)), os_, strides=(st, st),
                                       padding=pad, data_format=df)]
        case('conv', 'conv2d_transpose_{}_s{}_{}'.format(_pad, _st, _df), _ct)
case('conv', 'conv1d_transpose', lambda d: [K.conv_transpose(
    T(d.f(1, 4, 3)), T(d.f(3, 2, 3)), (1, 9, 2), (2,), 'valid', 'channels_last', (1,))])
case('conv', 'conv3d_transpose', lambda d: [K.conv3d_transpose(
    T(d.f(1, 2, 2, 2, 2)), T(d.f(2, 2, 2, 1, 2)), (1, 4, 4, 4, 1), strides=(2, 2, 2),
    padding='valid', data_format='channels_last')])
# grouped convolutions through op.convolution
for _g in [1, 2, 4]:
    case('conv', 'op_conv_group{}'.format(_g), lambda d, g=_g: [op.convolution(
        T(d.f(1, 5, 5, 4)), T(d.f(3, 3, 4 // g, 4)), padding=op.AutoPadding.VALID,
        data_format=op.ConvolutionDataFormat.CHANNELS_LAST,
        kernel_format=op.ConvolutionKernelFormat.CHANNELS_LAST, group=g,
        grouping=op.ConvolutionGrouping.EXPLICIT if g > 1 else op.ConvolutionGrouping.NONE,
        winograd_allowed=False)])
for _pads in [(1, 1), (0, 2), (2, 1)]:
    case('conv', 'op_conv_explicit_pads_{}{}'.format(*_pads), lambda d, pads=_pads: [
        op.convolution(T(d.f(1, 2, 5, 5)), T(d.f(2, 3, 3, 3)), padding=op.AutoPadding.EXPLICIT,
                       pads=pads, data_format=op.ConvolutionDataFormat.CHANNELS_FIRST,
                       kernel_format=op.ConvolutionKernelFormat.CHANNELS_FIRST,
                       winograd_allowed=False)])
case('conv', 'op_conv_same_lower', lambda d: [op.convolution(
    T(d.f(1, 6, 6, 2)), T(d.f(2, 2, 2, 3)), padding=op.AutoPadding.SAME_LOWER, strides=(2, 2),
    data_format=op.ConvolutionDataFormat.CHANNELS_LAST,
    kernel_format=op.ConvolutionKernelFormat.CHANNELS_LAST, winograd_allowed=False)])
case('conv', 'op_conv_winograd_3x3', lambda d: [op.convolution(
    T(d.f(1, 8, 8, 2)), T(d.f(3, 3, 2, 2)), padding=op.AutoPadding.SAME_UPPER,
    data_format=op.ConvolutionDataFormat.CHANNELS_LAST,
    kernel_format=op.ConvolutionKernelFormat.CHANNELS_LAST, winograd_allowed=True)])
for _ks, _st, _pad in [((2, 2, 1, 1), (1, 1, 1, 1), 'VALID'), ((2, 2, 1, 1), (2, 2, 1, 1), 'SAME'),
                       ((1, 3, 2, 1), (1, 1, 2, 1), 'VALID')]:
    case('conv', 'extract_image_patches_{}_{}_{}'.format(
        ''.join(map(str, _ks)), ''.join(map(str, _st)), _pad),
        lambda d, ks=_ks, st=_st, pad=_pad: [op.extract_image_patches(T(d.f(1, 4, 4, 2)), ks, st,
                                                                      padding=pad)])

# pooling
for _mode in ['max', 'avg']:
    for _pad in ['valid', 'same']:
        for _ps, _st in [((2, 2), (2, 2)), ((3, 3), (1, 1)), ((3, 2), (2, 1)), ((2, 2), (1, 1))]:
            for _df in ['channels_last', 'channels_first']:
                xs = (1, 5, 6, 2) if _df == 'channels_last' else (1, 2, 5, 6)
                case('pool', 'pool2d_{}_{}_p{}{}_s{}{}_{}'.format(_mode, _pad, _ps[0], _ps[1],
                                                                   _st[0], _st[1], _df),
                     lambda d, xs=xs, mode=_mode, pad=_pad, ps=_ps, st=_st, df=_df: [
                         K.pool2d(T(d.f(*xs)), ps, st, pad, df, mode)])
        case('pool', 'pool3d_{}_{}'.format(_mode, _pad), lambda d, mode=_mode, pad=_pad: [
            K.pool3d(T(d.f(1, 4, 4, 3, 2)), (2, 2, 2), (2, 2, 1), pad, 'channels_last', mode)])
        case('pool', 'pool1d_{}_{}'.format(_mode, _pad), lambda d, mode=_mode, pad=_pad: [
            K.pool(T(d.f(2, 7, 3)), (3,), (2,), pad, 'channels_last', mode)])
    case('pool', 'pool2d_{}_int32'.format(_mode), lambda d, mode=_mode: [
        K.pool2d(T(d.i(1, 4, 4, 1)), (2, 2), (2, 2), 'valid', 'channels_last', mode)])
for _pads in [(1, 1), (0, 1)]:
    case('pool', 'op_avg_pool_explicit_{}{}'.format(*_pads), lambda d, pads=_pads: [
        op.average_pool(T(d.f(1, 2, 5, 5)), (3, 3), (2, 2), pads=pads)])
    case('pool', 'op_max_pool_explicit_{}{}'.format(*_pads), lambda d, pads=_pads: [
        op.max_pool(T(d.f(1, 2, 5, 5)), (3, 3), (2, 2), pads=pads)])

# prng (prng_step's value is opaque: step + state + value are fused into one program)
for _shp in [(2, 3), (4,), (2, 2, 2)]:
    case('prng', 'random_uniform_{}'.format(_shape_name(_shp)),
         lambda d, s=_shp: [K.random_uniform(s, -1.0, 2.0, seed=7)])
case('prng', 'random_normal_2x3', lambda d: [K.random_normal((2, 3), 0.5, 2.0, seed=11)])
case('prng', 'dropout_3x4', lambda d: [K.dropout(T(d.f(3, 4)), 0.5, seed=3)])
case('prng', 'dropout_noise_shape', lambda d: [K.dropout(T(d.f(3, 4)), 0.25, noise_shape=(3, 1),
                                                         seed=5)])

# composite programs
case('misc', 'mixed_chain', lambda d: [K.sum(K.exp(T(d.f(3, 4))) * T(d.f(4)), axis=0) / 2])
case('misc', 'moving_average_update', lambda d: [
    K.moving_average_update(K.variable(d.f(3)), T(d.f(3)), 0.9)[1]])


def main(argv):
    only = argv[1] if len(argv) > 1 else None
    rec = Recorder()
    names = set()
    for family, name, fn in CASES:
        if name in names:
            raise SystemExit('duplicate case name ' + name)
        names.add(name)
        if only and only not in name:
            continue
        rec.reset_case(name, family)
        np.random.seed(zlib.crc32(name.encode()) & 0xffffffff)
        try:
            outs = fn(Data(name))
            if not isinstance(outs, (list, tuple)):
                outs = [outs]
        except Exception as e:  # noqa
            rec.failures.append(
                collections.OrderedDict([('name', name), ('family', family), ('stage', 'build'),
                                         ('error', '{}: {}'.format(type(e).__name__, e))]))
            continue
        for o in outs:
            try:
                rec.value(o)
            except Skip as e:
                sys.stderr.write('skip {}: {}\n'.format(name, e))
            except Exception as e:  # noqa
                sys.stderr.write('ERROR {}: {}\n'.format(name, traceback.format_exc()))
                rec.failures.append(
                    collections.OrderedDict([('name', name), ('family', family),
                                             ('stage', 'evaluate'),
                                             ('error', '{}: {}'.format(type(e).__name__, e))]))
    if only:
        for r in rec.programs.values():
            print(json.dumps(r)[:3000])
        for f in rec.failures:
            print('FAIL', json.dumps(f)[:3000])
        return
    if not os.path.isdir(OUT_DIR):
        os.makedirs(OUT_DIR)
    for fn in os.listdir(OUT_DIR):
        if fn.endswith('.jsonl'):
            os.remove(os.path.join(OUT_DIR, fn))
    by_family = collections.OrderedDict()
    for r in rec.programs.values():
        by_family.setdefault(r['family'], []).append(r)
    for fam, recs in by_family.items():
        with open(os.path.join(OUT_DIR, fam + '.jsonl'), 'w') as fh:
            for r in recs:
                fh.write(json.dumps(r, allow_nan=False) + '\n')
    with open(os.path.join(OUT_DIR, 'failures.jsonl'), 'w') as fh:
        for r in rec.failures:
            fh.write(json.dumps(r, allow_nan=False) + '\n')
    print('{} programs in {} families, {} failures'.format(len(rec.programs), len(by_family),
                                                         len(rec.failures)))


if __name__ == '__main__':
    main(sys.argv)
