#!/usr/bin/env python3
"""Checks every example in docs/ir.md against the current kiln binary (and libkiln.so).

Fenced blocks, in document order:
  ```mlir  graph: `kiln opt` must accept it and print it back unchanged (canonical) and
           round-trip; or, when the next block is also ```mlir, print exactly that next
           block (non-canonical input, then its printed form); or, when the next block is a
           ```text block starting with `$ kiln ...`, that command is run on it.
  ```text  starting with `$ kiln CMD FILE ...`: runs the command on the preceding mlir block
           (written under the name FILE so diagnostics carry it); stdout+stderr must equal
           the rest of the block.
  ```cpp   compiled against include/ and the build's libkiln.so and run; its stdout must equal
           the following ```text block (the one after "prints").
Inline diagnostics: each entry of MESSAGES is run through `kiln opt`; the whole output line
must be exact, and the quoted text must appear in the doc (whitespace-normalized). Finally
every backticked span that looks like a diagnostic must be covered by some check.
An mlir block that fails without a following `$ kiln` block counts as bad.
"""
import argparse, os, re, subprocess, sys, tempfile

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument('--source-dir', required=True, help='the kiln checkout')
parser.add_argument('--build-dir', required=True, help='the build with bin/kiln and libkiln.so')
parser.add_argument('--cxx', default='c++', help='compiler for the C++ examples')
parser.add_argument('doc', nargs='?', help='the document (default: docs/ir.md)')
opts = parser.parse_args()
ROOT = os.path.abspath(opts.source_dir)
BUILD = os.path.abspath(opts.build_dir)
K = f'{BUILD}/bin/kiln'
D = tempfile.mkdtemp(prefix='kiln_doc_check_')
doc = open(opts.doc or f'{ROOT}/docs/ir.md').read()
blocks = [(m.group(1), m.group(2)) for m in re.finditer(r'```(\w*)\n(.*?)```', doc, re.S)]

bad = 0
checked = 0
covered = []          # diagnostic texts checked against kiln


def report(ok, what, got=None, want=None):
    global bad, checked
    checked += 1
    print(f'  {"OK  " if ok else "BAD "} {what}')
    if not ok:
        bad += 1
        if got is not None:
            print('---got---\n' + got + '---doc---\n' + (want or ''))


def kiln(args, stdin=None, cwd=D):
    r = subprocess.run([K] + args, input=stdin, capture_output=True, text=True, cwd=cwd)
    return r.returncode, r.stdout, r.stderr


n_mlir = n_text = n_cpp = 0
for i, (lang, body) in enumerate(blocks):
    nxt = blocks[i + 1] if i + 1 < len(blocks) else (None, None)
    if lang == 'mlir':
        n_mlir += 1
        f = os.path.join(D, f'b{n_mlir}.kir')
        open(f, 'w').write(body)
        split = '// -----' in body
        rc, out, err = kiln(['opt'] + (['--split-input-file'] if split else []) + [f])
        first = body.splitlines()[0][:70]
        followed_by_cmd = nxt[0] == 'text' and nxt[1].startswith('$ kiln')
        if followed_by_cmd:
            if nxt[1].split()[2] == 'run':   # graphs that are run are shown in canonical form
                rc2, out2, _ = kiln(['opt', '-'], stdin=out)
                report(rc == 0 and out == body and out2 == out,
                       f'[mlir {n_mlir}] {first}: canonical, round-trips (run below)', out + err, body)
            else:
                report(True, f'[mlir {n_mlir}] {first} (checked by the command below)')
            continue
        if rc != 0:
            report(False, f'[mlir {n_mlir}] {first}: kiln opt failed: {err.strip()}')
            continue
        if out == body:
            rc2, out2, _ = kiln(['opt', '-'], stdin=out)
            report(rc2 == 0 and out2 == out, f'[mlir {n_mlir}] {first}: canonical, round-trips')
        elif nxt[0] == 'mlir':
            report(out == nxt[1], f'[mlir {n_mlir}] {first}: prints as the next block', out, nxt[1])
        else:
            report(False, f'[mlir {n_mlir}] {first}: not canonical', out, body)
    elif lang == 'text' and body.startswith('$ kiln'):
        n_text += 1
        cmdline = body.splitlines()[0][2:].split()
        prev = blocks[i - 1]
        args = cmdline[1:]
        # the file operand: the first argument that is not an option
        fidx = next(k for k, a in enumerate(args) if k > 0 and not a.startswith('-'))
        fname = args[fidx]
        if fname.startswith('examples/'):
            cwd = ROOT
            # the doc's copy of the example must be the file itself
            if prev[0] == 'mlir':
                same = open(os.path.join(ROOT, fname)).read() == prev[1]
                report(same, f'  doc copy of {fname} equals the file')
        else:
            cwd = D
            open(os.path.join(D, fname), 'w').write(prev[1])
        rc, out, err = kiln(args, cwd=cwd)
        expected = '\n'.join(body.splitlines()[1:]) + '\n'
        report(out + err == expected, f'[$ {" ".join(cmdline[1:])}] output', out + err, expected)
        for line in expected.splitlines():
            if ': error: ' in line:
                covered.append(line.split(': error: ', 1)[1])
    elif lang == 'cpp':
        n_cpp += 1
        src = os.path.join(D, f'cpp{n_cpp}.cpp')
        exe = os.path.join(D, f'cpp{n_cpp}')
        open(src, 'w').write(body)
        c = subprocess.run([opts.cxx, '-std=c++20', f'-I{ROOT}/include', f'-I{BUILD}/include', src,
                            f'-L{BUILD}', '-lkiln', f'-Wl,-rpath,{BUILD}', '-o', exe],
                           capture_output=True, text=True)
        if c.returncode != 0:
            report(False, f'[cpp {n_cpp}] does not compile:\n{c.stderr}')
            continue
        r = subprocess.run([exe], capture_output=True, text=True)
        want = nxt[1] if nxt[0] == 'text' else None
        report(r.returncode == 0 and want is not None and r.stdout == want,
               f'[cpp {n_cpp}] compiles, runs, prints the next block', r.stdout, want)
        for line in (want or '').splitlines():
            if line.startswith('error: '):
                covered.append(line[len('error: '):])

# ---- inline diagnostics --------------------------------------------------------------------
G = lambda header, body: f'graph @g{header} {{\n{body}\n}}\n'
MESSAGES = [
    # (file, text, expected stderr line or prefix ending in '...')
    ('bad_op.kir', G('(%x: f32[4,8]) -> f32[4,8]', '  %s = softmax %x : f32[4,8]\n  return %s'),
     "bad_op.kir:2:8: error: unknown operation 'softmax'"),
    ('bad_undef.kir', G('(%x: f32[4]) -> f32[4]', '  %y = add %x, %z : f32[4]\n  return %y'),
     "bad_undef.kir:2:16: error: use of undefined value '%z'"),
    ('bad_twice.kir', G('(%x: f32[4]) -> f32[4]', '  %x = neg %x : f32[4]\n  return %x'),
     "bad_twice.kir:2:3: error: value '%x' is defined twice (first at line 1, column 10)"),
    ('bad_arity.kir', G('(%x: f32[4]) -> f32[4]', '  %y = add %x : f32[4]\n  return %y'),
     "bad_arity.kir:2:8: error: 'add' takes 2 operands, got 1"),
    ('bad_attr.kir', G('(%x: f32[4,8]) -> f32[4]', '  %s = reduce_sum %x {axis = 1} : f32[4]\n  return %s'),
     "bad_attr.kir:2:23: error: 'reduce_sum' has no attribute 'axis' (did you mean 'axes'?) (expected one of: axes, keepdim)"),
    ('bad_needattr.kir', G('(%x: f32[4]) -> f32[4]', '  %y = permute %x : f32[4]\n  return %y'),
     "bad_needattr.kir:2:8: error: 'permute' needs attribute 'perm'"),
    ('bad_type.kir', G('(%x: f8[4]) -> f8[4]', '  return %x'),
     "bad_type.kir:1:14: error: unknown element type 'f8' (expected bool, i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32 or f64)"),
    ('bad_empty.kir', G('(%x: f32[3,0]) -> i64[3]', '  %i = argmax %x {axes = [1]} : i64[3]\n  return %i'),
     "bad_empty.kir:2:8: error: 'argmax' of f32[3,0] reduces an empty axis 1, which has no position"),
    ('bad_return.kir', G('(%x: f32[4,8]) -> f32[4,8]', '  %m = reduce_max %x {axes = [1]} : f32[4]\n  return %m'),
     "bad_return.kir:3:10: error: returned value has type f32[4] but the signature declares f32[4,8]"),
    ('bad_float.kir', G('() -> i32[]', '  %c = constant {value = 2.0} : i32[]\n  return %c'),
     "bad_float.kir:2:8: error: 'constant' value for i32 must be an integer, got 2.0"),
    ('bad_fit.kir', G('() -> i32[]', '  %c = constant {value = 3000000000} : i32[]\n  return %c'),
     "bad_fit.kir:2:8: error: 'constant' value 3000000000 does not fit in i32"),
    ('bad_int64.kir', G('() -> i64[]', '  %c = constant {value = 9223372036854775808} : i64[]\n  return %c'),
     "bad_int64.kir:2:26: error: integer 9223372036854775808 is out of range for int64"),
    ('bad_f64.kir', G('() -> f64[]', '  %c = constant {value = 1e400} : f64[]\n  return %c'),
     "bad_f64.kir:2:26: error: 1e400 is out of range for f64 (write inf for infinity)"),
    ('bad_number.kir', G('() -> f32[]', '  %c = constant {value = 1x} : f32[]\n  return %c'),
     "bad_number.kir:2:26: error: expected a number, found '1x'"),
    ('bad_numel.kir', G('(%x: f32[4294967296,4294967296]) -> f32[0]', '  %y = reshape %x : f32[0]\n  return %y'),
     "bad_numel.kir:1:29: error: the shape has more elements than an int64 can count"),
    ('bad_count.kir', G('(%a: f32[2]) -> (f32[2], f32[2])', '  %y = neg %a : f32[2]\n  return %y'),
     "bad_count.kir:3:3: error: 'return' gives 1 value but the signature at line 1 declares 2"),
    ('bad_bool.kir', G('(%a: bool[4], %b: bool[4]) -> bool[4]', '  %y = add %a, %b : bool[4]\n  return %y'),
     "bad_bool.kir:2:8: error: 'add' expects a numeric operand, got bool[4] and bool[4] (use the logic ops on bool)"),
    ('bad_slice.kir', G('(%x: f32[4]) -> f32[0]', '  %y = slice %x {start = [3], stop = [1]} : f32[0]\n  return %y'),
     "bad_slice.kir:2:8: error: 'slice' start 3 is after stop 1 on axis 0"),
    ('-', G('(%x: f32[4]) -> f32[4]', '  return %x') * 2,
     "<stdin>:4:1: error: expected end of file after the graph, found 'graph'"),
    # messages quoted without a location
    ('m.kir', G('(%x: f32[0,3], %y: f32[2,3]) -> f32[2,3]', '  %z = add %x, %y : f32[2,3]\n  return %z'),
     "'add' operands f32[0,3] and f32[2,3] cannot broadcast"),
    ('m.kir', G('(%x: f32[4,8], %m: f32[4]) -> f32[4,8]', '  %y = sub %x, %m : f32[4,8]\n  return %y'),
     "'sub' operands f32[4,8] and f32[4] cannot broadcast"),
    ('m.kir', G('(%x: f32[1,1,1,1,1,1,1,1,1]) -> f32[]', '  return %x'),
     "rank exceeds kiln's maximum rank of 8"),
    ('m.kir', G('(%x: f32[-1]) -> f32[]', '  return %x'), "dimension -1 is negative"),
    ('m.kir', G('(%x: f32[3,0]) -> f32[3]', '  %y = reduce_max %x {axes = [1]} : f32[3]\n  return %y'),
     "'reduce_max' of f32[3,0] reduces an empty axis 1, which has no identity"),
    ('m.kir', G('(%x: f32[3,0]) -> i64[3]', '  %y = argmax %x {axes = [1]} : i64[3]\n  return %y'),
     "'argmax' of f32[3,0] reduces an empty axis 1, which has no position"),
    ('m.kir', G('() -> f32[]', '  %c = constant : f32[]\n  return %c'),
     "'constant' needs exactly one of 'value' (a scalar for every element) or 'data' (one value per element)"),
    ('m.kir', G('() -> f32[2,3]', '  %c = constant {data = [1.0, 2.0, 3.0, 4.0, 5.0]} : f32[2,3]\n  return %c'),
     "'constant' data has 5 values but f32[2,3] holds 6"),
    ('m.kir', G('() -> bool[3]', '  %c = constant {data = [0, 5, false]} : bool[3]\n  return %c'),
     "'constant' data 5 does not fit in bool"),
    ('m.kir', G('() -> i32[2]', '  %c = constant {data = [1, 4294967297]} : i32[2]\n  return %c'),
     "'constant' data 4294967297 does not fit in i32"),
    ('m.kir', G('() -> i32[2]', '  %c = arange {start = 0, step = 2147483648} : i32[2]\n  return %c'),
     "'arange' step 2147483648 does not fit in i32"),
    ('m.kir', G('(%x: bool[2]) -> bool[3]', '  %c = pad %x {low = [1], high = [0], value = 2} : bool[3]\n  return %c'),
     "'pad' value 2 does not fit in bool"),
    ('m.kir', G('() -> i32[2]', '  %c = arange {start = 0.0, step = 1.0} : i32[2,2]\n  return %c'),
     "'arange' produces a 1-D numeric tensor, not ..."),
    ('m.kir', G('() -> i32[2]', '  %c = rand {seed = 1} : i32[2]\n  return %c'),
     "'rand' produces floating point, not ..."),
    ('m.kir', G('(%x: i32[2]) -> i32[2]', '  %y = exp %x : i32[2]\n  return %y'),
     "'exp' expects a floating-point operand, got i32[2] (cast it first)"),
    ('m.kir', G('(%x: bool[2]) -> bool[2]', '  %y = neg %x : bool[2]\n  return %y'),
     "'neg' expects a numeric operand, got bool[2]"),
    ('m.kir', G('(%x: f32[2]) -> f32[2]', '  %y = not %x : f32[2]\n  return %y'),
     "'not' expects a bool operand, got ..."),
    ('m.kir', G('(%x: f32[4]) -> i32[2]', '  %y = cast %x : i32[2]\n  return %y'),
     "'cast' changes the element type only, not the shape: f32[4] to i32[2]"),
    ('m.kir', G('(%a: bool[4], %b: bool[4]) -> bool[4]', '  %y = add %a, %b : bool[4]\n  return %y'),
     "'add' expects a numeric operand, got bool[4] and bool[4] (use the logic ops on bool)"),
    ('m.kir', G('(%a: f32[2], %b: bool[2]) -> bool[2]', '  %y = and %a, %b : bool[2]\n  return %y'),
     "'and' expects bool operands, got ..."),
    ('m.kir', G('(%c: f32[2], %a: f32[2]) -> f32[2]', '  %y = where %c, %a, %a : f32[2]\n  return %y'),
     "'where' condition must be bool, got ..."),
    ('m.kir', G('(%x: f32[4]) -> f32[4]', '  %y = reduce_sum %x {axes = []} : f32[4]\n  return %y'),
     "'reduce_sum' needs at least one axis"),
    ('m.kir', G('(%x: f32[4,8]) -> f32[4]', '  %y = reduce_max %x {axes = [2]} : f32[4]\n  return %y'),
     "'reduce_max' axis 2 is out of range for f32[4,8]"),
    ('m.kir', G('(%x: f32[4,8]) -> f32[]', '  %y = reduce_sum %x {axes = [1, 0]} : f32[]\n  return %y'),
     "'reduce_sum' axes [1, 0] must be sorted and unique"),
    ('m.kir', G('(%x: f32[4,8]) -> i64[]', '  %y = argmax %x {axes = [0, 1]} : i64[]\n  return %y'),
     "'argmax' reduces exactly one axis, got [0, 1]"),
    ('m.kir', G('(%x: f32[6]) -> f64[6]', '  %y = reshape %x : f64[6]\n  return %y'),
     "'reshape' keeps the element type: ..."),
    ('m.kir', G('(%x: f32[6]) -> f32[4]', '  %y = reshape %x : f32[4]\n  return %y'),
     "'reshape' cannot reshape f32[6] (6 elements) to f32[4] (4 elements)"),
    ('m.kir', G('(%x: f32[2,3]) -> f32[2,2]', '  %y = permute %x {perm = [0, 0]} : f32[2,2]\n  return %y'),
     "'permute' perm [0, 0] is not a permutation of the 2 axes of f32[2,3]"),
    ('m.kir', G('(%x: f32[1,3]) -> f64[4,3]', '  %y = expand %x : f64[4,3]\n  return %y'),
     "'expand' keeps the element type: f32[1,3] to f64[4,3]"),
    ('m.kir', G('(%x: f32[2]) -> f32[3]', '  %y = expand %x : f32[3]\n  return %y'),
     "'expand' cannot broadcast f32[2] to f32[3]"),
    ('m.kir', G('(%x: f32[4]) -> f32[2]', '  %y = slice %x {start = [0, 0], stop = [4]} : f32[2]\n  return %y'),
     "'slice' start, stop and step need one entry per axis of f32[4]"),
    ('m.kir', G('(%x: f32[4]) -> f32[2]', '  %y = slice %x {start = [0], stop = [4], step = [0]} : f32[2]\n  return %y'),
     "'slice' step on axis 0 is 0 (it must be positive, or negative to reverse)"),
    ('m.kir', G('(%x: f32[4]) -> f32[2]', '  %y = slice %x {start = [1], stop = [3], step = [-1]} : f32[2]\n  return %y'),
     "'slice' start 1 is below stop 3 on axis 0, and step -1 walks down"),
    ('m.kir', G('(%x: f32[4]) -> f32[2]', '  %y = slice %x {start = [4], stop = [-1], step = [-1]} : f32[2]\n  return %y'),
     "'slice' range (-1, 4] on axis 0 is outside -1..3 of f32[4]"),
    ('m.kir', G('(%x: f32[4]) -> f32[2]', '  %y = slice %x {start = [3], stop = [1]} : f32[2]\n  return %y'),
     "'slice' start 3 is after stop 1 on axis 0"),
    ('m.kir', G('(%x: f32[4]) -> f32[2]', '  %y = slice %x {start = [3], stop = [5]} : f32[2]\n  return %y'),
     "'slice' range [3, 5) on axis 0 is outside 0..4 of f32[4]"),
    ('m.kir', G('(%x: f32[4,5]) -> f32[4,5]', '  %y = unfold %x {axis = 2, size = 1, step = 1} : f32[4,5]\n  return %y'),
     "'unfold' axis 2 is not an axis of f32[4,5]"),
    ('m.kir', G('(%x: f32[4,5]) -> f32[4,5]', '  %y = unfold %x {axis = 1, size = 0, step = 1} : f32[4,5]\n  return %y'),
     "'unfold' size 0, step 1 and dilation 1 must be at least 1"),
    ('m.kir', G('(%x: f32[4,5]) -> f32[4,5]', '  %y = unfold %x {axis = 1, size = 6, step = 1} : f32[4,5]\n  return %y'),
     "'unfold' windows of 6 elements, 1 apart, do not fit the 5 elements of axis 1 of f32[4,5]"),
    ('m.kir', G('(%x: f32[1,1,1,1,1,1,1,2]) -> f32[2]', '  %y = unfold %x {axis = 7, size = 1, step = 1} : f32[2]\n  return %y'),
     "'unfold' of f32[1,1,1,1,1,1,1,2] would pass the maximum rank 8"),
    ('m.kir', G('(%x: i32[2], %i: i64[2], %u: f32[2]) -> i32[2]', '  %y = scatter %x, %i, %u {axis = 0} : i32[2]\n  return %y'),
     "'scatter' updates f32[2] must have the indices' shape [2] and the data's dtype i32"),
    ('m.kir', G('(%x: i32[2], %i: i64[2], %u: i32[2]) -> i32[2]', '  %y = scatter %x, %i, %u {axis = 0, add, max} : i32[2]\n  return %y'),
     "'scatter' takes at most one of add, mul, max and min"),
    ('m.kir', G('(%x: bool[2], %i: i64[2], %u: bool[2]) -> bool[2]', '  %y = scatter %x, %i, %u {axis = 0, add} : bool[2]\n  return %y'),
     "'scatter' combines numbers, not bool[2]"),
    ('m.kir', G('(%x: f32[2,3]) -> f32[2,3]', '  %y = cumsum %x {axis = 2} : f32[2,3]\n  return %y'),
     "'cumsum' axis 2 is out of range for f32[2,3]"),
    ('m.kir', G('(%x: f32[2,3]) -> i64[2,3]', '  %y = argsort %x {axis = 2} : i64[2,3]\n  return %y'),
     "'argsort' axis 2 is out of range for f32[2,3]"),
    ('m.kir', G('(%x: f32[4], %n: i32[4]) -> f32[4]', '  %y = shl %x, %n : f32[4]\n  return %y'),
     "'shl' shifts integers, got f32[4] and i32[4]"),
    ('m.kir', G('(%x: u64[2], %y: u64[2]) -> u64[2]', '  %m = pow %x, %y : u64[2]\n  return %m'),
     "'pow' on u64 is not supported: kiln computes u64 in 64-bit signed registers, where it would read values from 2^63 up as negative (cast to i64 or f64 first)"),
    ('m.kir', G('(%x: i32[2]) -> bool[2]', '  %y = isnan %x : bool[2]\n  return %y'),
     "'isnan' expects a floating-point operand, got i32[2] (cast it first)"),
    ('m.kir', G('(%x: f32[2], %i: f32[2]) -> f32[2]', '  %y = gather %x, %i {axis = 0} : f32[2]\n  return %y'),
     "'gather' indices must be i32 or i64, got f32[2]"),
    ('m.kir', G('(%x: f32[2,3], %i: i64[2]) -> f32[2]', '  %y = gather %x, %i {axis = 0} : f32[2]\n  return %y'),
     "'gather' indices i64[2] and data f32[2,3] must have the same rank"),
    ('m.kir', G('(%x: f32[2,3], %i: i64[2,3]) -> f32[2,3]', '  %y = gather %x, %i {axis = 2} : f32[2,3]\n  return %y'),
     "'gather' axis 2 is not an axis of f32[2,3]"),
    ('m.kir', G('(%x: f32[2,3], %i: i64[3,3]) -> f32[3,3]', '  %y = gather %x, %i {axis = 1} : f32[3,3]\n  return %y'),
     "'gather' indices i64[3,3] are longer than data f32[2,3] on axis 0, which is not the gathered axis 1"),
    ('m.kir', G('(%x: f32[4]) -> f32[2]', '  %y = pad %x {low = [1, 0], high = [0]} : f32[2]\n  return %y'),
     "'pad' low and high need one entry per axis of ..."),
    ('m.kir', G('(%x: f32[4]) -> f32[3]', '  %y = pad %x {low = [-1], high = [0]} : f32[3]\n  return %y'),
     "'pad' amounts must be non-negative, got low [-1] high [0]"),
    ('m.kir', G('(%x: bool[9223372036854775807]) -> bool[1]', '  %y = pad %x {low = [1], high = [0]} : bool[1]\n  return %y'),
     "'pad' of bool[9223372036854775807] by low [1] high [0] overflows int64 on axis 0"),
    ('m.kir', G('(%a: f32[2,1], %b: f32[3,2]) -> f32[2,3]', '  %y = concat %a, %b {axis = 1} : f32[2,3]\n  return %y'),
     "'concat' operands f32[2,1] and f32[3,2] differ outside axis 1"),
    ('m.kir', G('(%a: bool[9223372036854775807], %b: bool[1]) -> bool[1]', '  %y = concat %a, %b {axis = 0} : bool[1]\n  return %y'),
     "'concat' of bool[9223372036854775807] and bool[1] overflows int64 on axis 0"),
    ('m.kir', G('(%a: f32[2,1]) -> f32[2,1]', '  %y = concat %a {axis = 2} : f32[2,1]\n  return %y'),
     "'concat' axis 2 is out of range for f32[2,1]"),
    ('m.kir', G('(%a: bool[2,2], %b: bool[2,2]) -> bool[2,2]', '  %y = matmul %a, %b : bool[2,2]\n  return %y'),
     "'matmul' expects a numeric operand, got bool[2,2] and bool[2,2] (use the logic ops on bool)"),
    ('m.kir', G('(%a: f32[3], %b: f32[3,2]) -> f32[2]', '  %y = matmul %a, %b : f32[2]\n  return %y'),
     "'matmul' needs operands of rank 2 or more, got f32[3] and f32[3,2]"),
    ('m.kir', G('(%a: f32[2,3], %b: f32[4,2]) -> f32[2,2]', '  %y = matmul %a, %b : f32[2,2]\n  return %y'),
     "'matmul' contracting dims differ: f32[2,3] and f32[4,2] (3 vs 4)"),
    ('m.kir', G('(%a: f32[2,2,3], %b: f32[3,3,2]) -> f32[2,2]', '  %y = matmul %a, %b : f32[2,2]\n  return %y'),
     "'matmul' batch dims of f32[2,2,3] and f32[3,3,2] cannot broadcast"),
    ('m.kir', G('(%x: f32[1,4,5,5], %w: f32[6,3,3,3]) -> f32[1,6,5,5]',
                '  %y = conv %x, %w {strides = [1, 1], low = [1, 1], high = [1, 1], groups = 2} : f32[1,6,5,5]\n  return %y'),
     "'conv' of x [1,4,5,5] by w [6,3,3,3]: 4 channels and 6 filters of 3 channels do not make 2 groups"),
    ('m.kir', G('(%x: f32[1,4,5,5], %w: f32[6,4,3,3]) -> f32[1,6,5,5]',
                '  %y = conv %x, %w {strides = [1], low = [1, 1], high = [1, 1]} : f32[1,6,5,5]\n  return %y'),
     "'conv' of x [1,4,5,5] by w [6,4,3,3]: strides, dilations, low and high need one entry per spatial dim (2)"),
    ('m.kir', G('(%q: f64[3,4], %k: f64[5,4], %v: f64[5,6]) -> f64[3,6]',
                '  %y = attention %q, %k, %v {scale = 1.0} : f64[3,6]\n  return %y'),
     "'attention' needs f32 operands of rank 2 or more, got f64[3,4]"),
    ('m.kir', G('(%q: f32[2,3,8], %k: f32[2,5,4], %v: f32[2,5,6]) -> f32[2,3,6]',
                '  %y = attention %q, %k, %v {scale = 1.0} : f32[2,3,6]\n  return %y'),
     "'attention' q f32[2,3,8] and k f32[2,5,4] differ in depth"),
    ('m.kir', G('(%q: f32[3,4], %k: f32[5,4], %v: f32[5,6], %b: f32[2,3,5]) -> f32[3,6]',
                '  %y = attention %q, %k, %v, %b {scale = 1.0} : f32[3,6]\n  return %y'),
     "'attention' bias f32[2,3,5] does not broadcast to the scores f32[3,5]"),
    ('m.kir', G('(%a: f32[2]) -> (f32[2], f32[2])', '  %y = neg %a : f32[2]\n  return %y'),
     "'return' gives 1 value but the signature at line 1 declares 2"),
    # numbers (2.1, 2.2)
    ('m.kir', G('() -> f64[]', '  %c = constant {value = 9223372036854775808} : f64[]\n  return %c'),
     "integer 9223372036854775808 is out of range for int64"),
    ('m.kir', G('() -> f64[]', '  %c = constant {value = 1x} : f64[]\n  return %c'),
     "expected a number, found '1x'"),
    ('m.kir', G('() -> f64[]', '  %c = constant {value = -nan} : f64[]\n  return %c'),
     "expected a number, found '-nan'"),
    ('m.kir', G('() -> f64[]', '  %c = constant {value = 0x1.8p1} : f64[]\n  return %c'),
     "expected a number, found '0x1.8p1'"),
    ('m.kir', G('() -> f64[]', '  %c = constant {value = 1e400} : f64[]\n  return %c'),
     "1e400 is out of range for f64 (write inf for infinity)"),
    ('m.kir', G('(%x: f32[0,4611686018427387904,4]) -> f32[]', '  return %x'),
     "the shape has more elements than an int64 can count"),
    ('m.kir', G('() -> f32[2]', '  %c = constant {value = 1.0} : f32[2]\n  return %c') + '// -----\n',
     "expected 'graph', found end of file"),
    ('m.kir', G('() -> f32[]', '  %c = constant {value = 1.0} : f32[]\n  return %c') * 2,
     "expected end of file after the graph, found 'graph'"),
    # symbolic dims (3.3)
    ('m.kir', G('(%x: f32[n,4], %y: f32[m,4]) -> f32[n,4]', '  %z = add %x, %y : f32[n,4]\n  return %z'),
     "'add' operands f32[n,4] and f32[m,4] cannot broadcast: cannot prove n == m (nor that either is 1)"),
    ('m.kir', G('(%a: f32[b,k], %w: f32[n,8]) -> f32[b,8]', '  %y = matmul %a, %w : f32[b,8]\n  return %y'),
     "'matmul' contracting dims differ: f32[b,k] and f32[n,8] (k vs n, not provably equal)"),
    ('m.kir', G('(%x: f32[b,t,768]) -> f32[b,t,769]', '  %y = reshape %x : f32[b,t,769]\n  return %y'),
     "'reshape' cannot reshape f32[b,t,768] (768*b*t elements) to f32[b,t,769] (769*b*t elements): "
     "the counts are not provably equal"),
    ('m.kir', G('(%x: f32[n]) -> f32[n,3]', '  %w = unfold %x {axis = 0, size = 3, step = 1} : f32[n,3]\n  return %w'),
     "'unfold' on axis 0 of f32[n]: that axis is symbolic (n), and the op needs its size (bind it first)"),
    ('m.kir', G('(%x: f32[n]) -> f32[n]', '  %s = slice %x {start = [0], stop = [n], step = [2]} : f32[n]\n  return %s'),
     "'slice' on axis 0 of f32[n] from 0 to n steps by 2: a range with symbolic dims steps by 1"),
]
# What the doc says is accepted (2.2, 2.4, 3.2): these must pass and print as given.
ACCEPTED = [
    (G('() -> (f64[3], i32[2], bool[4])',
       '  %f = constant {data = [+inf, 1e-400, -inf]} : f64[3]\n'
       '  %i = constant {data = [-2147483648, 2147483647]} : i32[2]\n'
       '  %b = constant {data = [0, 1, true, false]} : bool[4]\n  return %f, %i, %b'),
     G('() -> (f64[3], i32[2], bool[4])',
       '  %f = constant {data = [inf, 0.0, -inf]} : f64[3]\n'
       '  %i = constant {data = [-2147483648, 2147483647]} : i32[2]\n'
       '  %b = constant {data = [false, true, true, false]} : bool[4]\n  return %f, %i, %b')),
    (G('(%x: bool[9223372036854775807]) -> bool[1]',
       '  %y = slice %x {start = [0], stop = [9223372036854775807], step = [9223372036854775807]} : bool[1]\n  return %y'),
     None),
    (G('(%a: bool[2,3], %b: f32[3,2], %c: bool[2], %d: i32[2]) -> (f32[2,2], f64[2], i32[2])',
       '  %m = matmul %a, %b : f32[2,2]\n  %q = div %c, %d : f64[2]\n  %x = max %c, %d : i32[2]\n  return %m, %q, %x'),
     None),
]

flat = ' '.join(doc.split())
print('inline diagnostics:')
for fname, text, want in MESSAGES:
    split = '// -----' in text
    args = ['opt'] + (['--split-input-file'] if split else []) + [fname]
    if fname == '-':
        rc, out, err = kiln(args, stdin=text)
    else:
        open(os.path.join(D, fname), 'w').write(text)
        rc, out, err = kiln(args)
    line = err.strip().splitlines()[0] if err.strip() else ''
    msg = line.split(': error: ', 1)[1] if ': error: ' in line else ''
    if want.endswith(' ...'):
        ok = msg.startswith(want[:-3])
    elif ': error: ' in want:
        ok = line == want
    else:
        ok = msg == want
    in_doc = ' '.join(want.split()) in flat
    covered.append(want.split(': error: ', 1)[1] if ': error: ' in want else want)
    report(ok and rc == 1 and in_doc, f'{want}{"" if in_doc else "   <-- NOT IN THE DOC"}',
           None if ok else line + '\n', want + '\n')
print('accepted inputs:')
for text, printed in ACCEPTED:
    rc, out, err = kiln(['opt', '-'], stdin=text)
    report(rc == 0 and out == (printed or text), f'accepted: {text.splitlines()[1].strip()[:70]}', out + err,
           printed or text)

# Every backticked span that looks like a diagnostic must be covered.
print('coverage of quoted diagnostics:')
body = re.sub(r'```.*?```', '', doc, flags=re.S)
norm = lambda x: ' '.join(x.split())
cov = {norm(c) for c in covered}
diag_re = re.compile(r"^('[a-z_]+' |expected |unknown |use of |value '|integer |rank exceeds|dimension |"
                     r"the shape |returned value|\S+\.kir:|<stdin>:|[-+]?\d\S* is out of range)")
for span in re.findall(r'`([^`]+)`', body):
    s = norm(span)
    if not diag_re.match(s) or ' ' not in s:
        continue
    s2 = s.split(': error: ', 1)[1] if ': error: ' in s else s
    ok = s2 in cov or s in cov or any(c.endswith(' ...') and s2.startswith(c[:-4]) for c in cov) \
        or (s2.endswith(' ...') and any(c.startswith(s2[:-4]) for c in cov))
    if not ok:
        report(False, f'quoted but not checked: {s}')
    else:
        checked_ok = True
print(f'{n_mlir} mlir blocks, {n_text} `$ kiln` output blocks, {n_cpp} C++ blocks; '
      f'{len(MESSAGES)} inline diagnostics, {len(ACCEPTED)} accepted inputs')
print(f'checks: {checked}, bad: {bad}')
sys.exit(1 if bad else 0)
