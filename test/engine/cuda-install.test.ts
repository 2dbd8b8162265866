import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import test from 'node:test';
import { CUDA_RUNTIME_LIBRARIES, describeMissingRuntime, missingCudaRuntime } from '../../src/engine/cuda-install.js';
import { tmpDir } from '../helpers/tmp.js';

/** `ldconfig -p` lines for the CUDA libraries on the GPU machine lent on 2026-11-25 (H200, driver 580, CUDA 13.0 only). */
const CUDA13_ONLY = `	libcurand.so.10 (libc6,x86-64) => /usr/local/cuda/targets/x86_64-linux/lib/libcurand.so.10
	libcurand.so (libc6,x86-64) => /usr/local/cuda/targets/x86_64-linux/lib/libcurand.so
	libcufftw.so.12 (libc6,x86-64) => /usr/local/cuda/targets/x86_64-linux/lib/libcufftw.so.12
	libcufft.so.12 (libc6,x86-64) => /usr/local/cuda/targets/x86_64-linux/lib/libcufft.so.12
	libcufft.so (libc6,x86-64) => /usr/local/cuda/targets/x86_64-linux/lib/libcufft.so
	libcudnn.so.9 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcudnn.so.9
	libcudart.so.13 (libc6,x86-64) => /usr/local/cuda/targets/x86_64-linux/lib/libcudart.so.13
	libcudart.so (libc6,x86-64) => /usr/local/cuda/targets/x86_64-linux/lib/libcudart.so
	libcublasLt.so.13 (libc6,x86-64) => /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
	libcublas.so.13 (libc6,x86-64) => /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
`;

test('a CUDA 13-only machine lacks the CUDA 12 runtime the provider links against, and the message names what it has instead', () => {
  const r = missingCudaRuntime({ libraryPath: '', ldconfig: `1234 libs found in cache \`/etc/ld.so.cache'\n${CUDA13_ONLY}` });
  assert.deepEqual(r.missing, ['libcudart.so.12', 'libcublas.so.12', 'libcublasLt.so.12', 'libcufft.so.11']);
  assert.deepEqual(r.others, ['libcublas.so.13', 'libcublasLt.so.13', 'libcudart.so.13', 'libcufft.so.12']);
  const message = describeMissingRuntime(r);
  assert.match(message ?? '', /needs CUDA 12 and cuDNN 9, and the loader cannot find libcudart\.so\.12, libcublas\.so\.12, libcublasLt\.so\.12, libcufft\.so\.11; the loader finds libcublas\.so\.13, .*libcudart\.so\.13/);
  assert.match(message ?? '', /LD_LIBRARY_PATH/);
});

test('the CUDA 12 runtime is found in the ld.so cache or in LD_LIBRARY_PATH folders', (t) => {
  const cuda12 = CUDA_RUNTIME_LIBRARIES.map((lib) => `\t${lib} (libc6,x86-64) => /usr/local/cuda-12.8/lib64/${lib}`).join('\n');
  assert.deepEqual(missingCudaRuntime({ libraryPath: '', ldconfig: cuda12 }), { missing: [], others: [] });
  assert.equal(describeMissingRuntime({ missing: [], others: [] }), undefined);
  // pip's nvidia-* wheels are not in the cache; their folders on LD_LIBRARY_PATH count
  const [a, b] = [tmpDir(t), tmpDir(t)];
  for (const lib of CUDA_RUNTIME_LIBRARIES.slice(0, 3)) fs.writeFileSync(path.join(a, lib), '');
  for (const lib of CUDA_RUNTIME_LIBRARIES.slice(3)) fs.writeFileSync(path.join(b, lib), '');
  assert.deepEqual(missingCudaRuntime({ libraryPath: `${a}::${b}`, ldconfig: '' }).missing, []);
  assert.deepEqual(missingCudaRuntime({ libraryPath: a, ldconfig: '' }).missing, CUDA_RUNTIME_LIBRARIES.slice(3));
});
