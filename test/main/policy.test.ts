import assert from 'node:assert/strict';
import { test } from 'node:test';
import { IN_USE_BELOW_SECONDS, POWER_SETTLE_MS, PolicyMonitor, inSchedule } from '../../src/main/policy.js';

const policies = { pauseOnBattery: true, onlyWhenIdle: false, idleMinutes: 5, scheduleEnabled: false, scheduleFromHour: 22, scheduleToHour: 7 };

test('on battery holds contribution only after the power change has lasted long enough', () => {
  const m = new PolicyMonitor();
  assert.equal(m.evaluate({ onBattery: false, idleSeconds: 0, localHour: 12 }, policies, 0), undefined);
  assert.equal(m.evaluate({ onBattery: true, idleSeconds: 0, localHour: 12 }, policies, 1000), undefined, 'a fresh unplug does not hold yet');
  assert.match(m.evaluate({ onBattery: true, idleSeconds: 0, localHour: 12 }, policies, 1000 + POWER_SETTLE_MS) ?? '', /battery/);
  // flapping at the plug: back on mains for a moment, then battery again, never releases
  assert.match(m.evaluate({ onBattery: false, idleSeconds: 0, localHour: 12 }, policies, 2000 + POWER_SETTLE_MS) ?? '', /battery/);
  assert.match(m.evaluate({ onBattery: true, idleSeconds: 0, localHour: 12 }, policies, 3000 + POWER_SETTLE_MS) ?? '', /battery/);
  assert.match(m.evaluate({ onBattery: false, idleSeconds: 0, localHour: 12 }, policies, 4000 + POWER_SETTLE_MS) ?? '', /battery/);
  assert.equal(m.evaluate({ onBattery: false, idleSeconds: 0, localHour: 12 }, policies, 4000 + 2 * POWER_SETTLE_MS), undefined, 'settled on mains: released');
});

test('a machine that starts on battery holds at once; the policy off never holds', () => {
  assert.match(new PolicyMonitor().evaluate({ onBattery: true, idleSeconds: 0, localHour: 12 }, policies, 0) ?? '', /battery/);
  assert.equal(new PolicyMonitor().evaluate({ onBattery: true, idleSeconds: 0, localHour: 12 }, { ...policies, pauseOnBattery: false }, 0), undefined);
});

test('only-when-idle has hysteresis: idle after N minutes, in use again only on fresh input', () => {
  const idle = { ...policies, pauseOnBattery: false, onlyWhenIdle: true, idleMinutes: 5 };
  const m = new PolicyMonitor();
  const at = (idleSeconds: number) => m.evaluate({ onBattery: false, idleSeconds, localHour: 12 }, idle, 0);
  assert.match(at(0) ?? '', /in use/);
  assert.match(at(299) ?? '', /in use .*5 min/);
  assert.equal(at(300), undefined, 'idle after 5 minutes');
  // the OS idle counter can dip (e.g. a stray event) without fresh input: stays idle
  assert.equal(at(120), undefined);
  assert.equal(at(IN_USE_BELOW_SECONDS), undefined);
  assert.match(at(IN_USE_BELOW_SECONDS - 1) ?? '', /in use/, 'fresh input: in use again');
  assert.match(at(200) ?? '', /in use/, 'and stays in use until the full idle time has passed again');
});

test('the schedule holds contribution outside its hours, wrapping past midnight, and says when it computes', () => {
  assert.equal(inSchedule(23, 22, 7), true);
  assert.equal(inSchedule(3, 22, 7), true);
  assert.equal(inSchedule(7, 22, 7), false, 'the closing hour is outside');
  assert.equal(inSchedule(12, 22, 7), false);
  assert.equal(inSchedule(9, 9, 17), true);
  assert.equal(inSchedule(17, 9, 17), false);
  assert.equal(inSchedule(5, 8, 8), true, 'equal hours: all day');
  const night = { ...policies, pauseOnBattery: false, scheduleEnabled: true };
  const m = new PolicyMonitor();
  assert.equal(m.evaluate({ onBattery: false, idleSeconds: 0, localHour: 23 }, night, 0), undefined);
  assert.equal(m.evaluate({ onBattery: false, idleSeconds: 0, localHour: 12 }, night, 0), 'outside the schedule (computes from 22:00 to 07:00)');
  assert.equal(m.evaluate({ onBattery: false, idleSeconds: 0, localHour: 12 }, { ...night, scheduleEnabled: false }, 0), undefined, 'off: never holds');
});
