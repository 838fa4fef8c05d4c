/**
 * Exports never replace a file unless asked. The server refuses an export onto an existing
 * file with a `file_error` whose message ends in {@link FILE_EXISTS}; the page then asks,
 * beside the command's outcome, whether to replace it, and sends the command again with
 * `overwrite: true` only on "Replace".
 */
import type { Outcome } from '../common/messages';
import { h } from './dom';

/** What the server's refusal says after the path (`FILE_EXISTS` in onthefly/protocol.py). */
export const FILE_EXISTS = 'exists; expected a new file name, or overwrite to replace it';

/** Whether `outcome` refused an export because its file exists. */
export function refusedAsExisting(outcome: Outcome): boolean {
  return !outcome.ok && outcome.code === 'file_error' && outcome.message.endsWith(FILE_EXISTS);
}

/**
 * Ask after `anchor` whether to replace the file `path`; resolves `true` on "Replace", `false`
 * on "Keep it". Inside VS Code a webview has no `window.confirm`: the question is in the page.
 */
export function confirmReplace(anchor: Element, path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const replace = h('button', { class: 'small', 'data-testid': 'confirm-replace' }, 'Replace');
    const keep = h('button', { class: 'small', 'data-testid': 'confirm-keep' }, 'Keep it');
    const question = h('div', { class: 'toolbar confirm', role: 'alertdialog', 'data-testid': 'confirm-overwrite' }, `${path} exists. Replace it?`, replace, keep);
    const answer = (yes: boolean): void => {
      question.remove();
      resolve(yes);
    };
    replace.addEventListener('click', () => answer(true));
    keep.addEventListener('click', () => answer(false));
    anchor.after(question);
    replace.focus();
  });
}
