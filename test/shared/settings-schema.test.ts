// The settings form shows the schema's refusal under each number field: it must read as advice, not zod's.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DEFAULT_SETTINGS, PoliciesSchema } from '../../src/shared/settings-schema.js';

test('a number setting that is empty, fractional or out of range is refused with the range it takes', () => {
  const refusal = (field: 'maxCpuThreads' | 'maxMemoryMiB' | 'bandwidthCapKiBps' | 'idleMinutes', value: unknown) => {
    const r = PoliciesSchema.safeParse({ ...DEFAULT_SETTINGS.policies, [field]: value });
    return r.success ? 'accepted' : r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
  };
  assert.equal(refusal('maxCpuThreads', null), 'maxCpuThreads: a whole number from 1 to 256', 'an emptied field');
  assert.equal(refusal('maxCpuThreads', 1.5), 'maxCpuThreads: a whole number from 1 to 256');
  assert.equal(refusal('maxCpuThreads', 0), 'maxCpuThreads: a whole number from 1 to 256');
  assert.equal(refusal('maxMemoryMiB', 100), 'maxMemoryMiB: a whole number from 512 to 1048576');
  assert.equal(refusal('bandwidthCapKiBps', -5), 'bandwidthCapKiBps: a whole number from 0 to 10485760');
  assert.equal(refusal('idleMinutes', 241), 'idleMinutes: a whole number from 1 to 240');
  assert.equal(refusal('maxCpuThreads', 8), 'accepted');
});
