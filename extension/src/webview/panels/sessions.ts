/**
 * Session files and the checkpoint ring of the selected run: "Export Session…" writes the
 * whole session to a `.otf` file, "Load Session…" loads one into the paused run, and the
 * ring's snapshots can be listed, added and restored (while paused). The file is picked with
 * the editor's dialog inside VS Code; a browser tab has no access to the training machine's
 * files, so there the path is typed into a field (absolute, or relative to the training
 * process's directory).
 */
import type { CommandBody, Outcome, PathPurpose } from '../../common/messages';
import type { Pill } from '../../common/state';
import { fill, formatBytes, h } from '../dom';
import { confirmReplace, refusedAsExisting } from '../overwrite';
import { clock } from './logs';
import { replyOf } from '../../common/replies';
import { AckLines } from './controls';

/** A file name for an export of run `name` at `step`: `cnn-step1200.otf`. */
export function suggestedName(name: string, step: number): string {
  return `${name.replace(/[^\w.-]+/g, '_') || 'session'}-step${step}.otf`;
}

export interface SessionHooks {
  send(command: CommandBody): Promise<Outcome>;
  /** The editor's file dialog, when there is one. */
  choosePath?: (purpose: PathPurpose, suggested: string) => Promise<string | null>;
}

export class SessionsPanel {
  readonly element = h('section', { class: 'panel sessions', 'aria-label': 'Session' });
  private readonly path = h('input', { type: 'text', placeholder: '/path/to/run.otf', 'aria-label': 'Session file path', 'data-testid': 'session-path', size: 30 });
  private readonly exportButton = h('button', { 'data-testid': 'session-export', title: 'Write the whole session to a .otf file' }, 'Export Session…');
  private readonly loadButton = h('button', { 'data-testid': 'session-load', title: "Load a .otf file's model and optimizer state into the paused run" }, 'Load Session…');
  private readonly snapshotButton = h('button', { class: 'small', 'data-testid': 'snapshot', title: 'Add a snapshot of the run to the checkpoint ring' }, 'Snapshot now');
  private readonly refreshButton = h('button', { class: 'small', 'data-testid': 'checkpoints-refresh' }, 'Refresh');
  private readonly ack = h('output', { class: 'ack', 'data-testid': 'session-ack', 'aria-live': 'polite' });
  private readonly acks = new AckLines(this.ack);
  private readonly list = h('div', { 'data-testid': 'checkpoints' });
  private runKey = '';
  private runName = '';
  private step = 0;
  private state: Pill | null = null;
  private listed = '';

  constructor(private readonly hooks: SessionHooks) {
    this.exportButton.addEventListener('click', () => void this.exportSession());
    this.loadButton.addEventListener('click', () => void this.loadSession());
    this.snapshotButton.addEventListener('click', () => void this.command({ type: 'snapshot' }, 'snapshot').then(() => this.refresh()));
    this.refreshButton.addEventListener('click', () => void this.refresh());
    this.path.hidden = Boolean(hooks.choosePath);
    this.element.append(
      h('h3', {}, 'Session'),
      h('div', { class: 'toolbar' }, this.path, this.exportButton, this.loadButton),
      this.ack,
      h('div', { class: 'toolbar checkpoint-bar' }, h('span', { class: 'muted' }, 'Checkpoints'), this.snapshotButton, this.refreshButton),
      this.list,
    );
  }

  render(runKey: string, state: Pill | null, name: string, step: number): void {
    const changed = runKey !== this.runKey;
    const paused = state === 'paused';
    if (changed) {
      this.runKey = runKey;
      this.acks.show(runKey);
      this.listed = '';
      fill(this.list, h('p', { class: 'muted' }, 'Refresh to list the checkpoint ring.'));
    }
    this.runName = name;
    this.step = step;
    const live = state !== null && state !== 'disconnected' && state !== 'finished';
    this.exportButton.disabled = !live;
    this.snapshotButton.disabled = !live;
    this.refreshButton.disabled = !live;
    this.loadButton.disabled = !paused;
    for (const button of this.list.querySelectorAll('button')) button.disabled = !paused;
    // A pause adds a snapshot to the ring: list it when the run pauses.
    if (live && (changed || state !== this.state) && paused) void this.refresh();
    this.state = state;
  }

  private async exportSession(): Promise<void> {
    const path = await this.pick('export');
    if (!path) return;
    // The editor's save dialog has already asked before picking an existing file.
    const asked = Boolean(this.hooks.choosePath);
    const outcome = await this.command({ type: 'export', path, overwrite: asked }, 'export');
    if (!asked && refusedAsExisting(outcome) && (await confirmReplace(this.ack, path))) {
      await this.command({ type: 'export', path, overwrite: true }, 'export');
    }
  }

  private async loadSession(): Promise<void> {
    const path = await this.pick('import');
    if (path) await this.command({ type: 'import', path }, 'load');
  }

  private async pick(purpose: PathPurpose): Promise<string | null> {
    if (this.hooks.choosePath) return this.hooks.choosePath(purpose, suggestedName(this.runName, this.step));
    const path = this.path.value.trim();
    if (!path) {
      this.acks.set(this.runKey, `${purpose}: type the path of a .otf file on the training machine first`, 'error');
      this.path.focus();
      return null;
    }
    return path;
  }

  private command(command: CommandBody, label: string): Promise<Outcome> {
    return this.acks.track(this.runKey, label, this.hooks.send(command)).then((outcome) => {
      // An export's reply names the written file (other commands' ack lines say where the run is).
      const written = command.type === 'export' ? replyOf('export', outcome) : null;
      if (written?.ok && written.data.path) {
        this.acks.set(this.runKey, `${label}: ${written.data.path} (${formatBytes(written.data.size ?? 0)}) at step ${String(written.data.step)}`, 'ok');
      }
      return outcome;
    });
  }

  private async refresh(): Promise<void> {
    const key = this.runKey;
    const outcome = replyOf('checkpoints', await this.hooks.send({ type: 'checkpoints' }));
    if (key !== this.runKey) return;
    if (!outcome.ok) {
      fill(this.list, h('p', { class: 'muted' }, `cannot list checkpoints: ${outcome.message}`));
      return;
    }
    const entries = outcome.data.checkpoints;
    const signature = JSON.stringify(entries);
    if (signature === this.listed) return;
    this.listed = signature;
    if (entries.length === 0) {
      fill(this.list, h('p', { class: 'muted' }, 'No checkpoint yet (a pause or a test takes one).'));
      return;
    }
    const paused = this.state === 'paused';
    const head = h('tr', {}, ...['Id', 'Step', 'Epoch', 'Reason', 'Time', 'Size', ''].map((n) => h('th', {}, n)));
    const rows = entries.map((c) => {
      const restore = h('button', { class: 'small', 'data-testid': 'restore', title: 'Load this checkpoint into the paused run' }, 'Restore');
      restore.disabled = !paused;
      restore.addEventListener('click', () => void this.command({ type: 'restore', checkpoint: c.id }, `restore ${c.id}`));
      return h(
        'tr',
        { 'data-checkpoint': c.id },
        h('td', {}, c.id),
        h('td', {}, String(c.step)),
        h('td', {}, String(c.epoch)),
        h('td', {}, c.reason),
        h('td', {}, clock(c.time)),
        h('td', {}, formatBytes(c.size)),
        h('td', {}, restore),
      );
    });
    fill(this.list, h('table', {}, h('thead', {}, head), h('tbody', {}, ...rows)));
  }
}
