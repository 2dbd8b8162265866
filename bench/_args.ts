/** A benchmark's `--name value` arguments (`npm run bench -- <name> [args…]`). */
import { PRESET_NAMES, type PresetName } from '../src/engine/albert/config.js';

/** The value after `name`, or `fallback` when it is absent. */
export function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(name);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
}

/** An integer from 1 to `max`. */
export function countArg(name: string, fallback: number, max: number): number {
  const value = Number(arg(name, String(fallback)));
  if (!Number.isInteger(value) || value < 1 || value > max) throw new Error(`${name} ${value}: an integer from 1 to ${max}`);
  return value;
}

/** One model preset. */
export function presetArg(name: string, fallback: PresetName): PresetName {
  const preset = arg(name, fallback) as PresetName;
  if (!PRESET_NAMES.includes(preset)) throw new Error(`${name} ${preset}: accepted: ${PRESET_NAMES.join(', ')}`);
  return preset;
}

/** Model presets, comma-separated. */
export function presetsArg(name: string, fallback: string): PresetName[] {
  const presets = arg(name, fallback).split(',') as PresetName[];
  for (const p of presets) if (!PRESET_NAMES.includes(p)) throw new Error(`${name}: unknown preset ${p}; accepted: ${PRESET_NAMES.join(', ')}`);
  return presets;
}
