import assert from 'node:assert/strict';
import { test } from 'node:test';
import type * as vscode from 'vscode';
import { dashboardHtml, nonce, webviewOptions } from '../../src/host/dashboardPanel';
import { Uri } from '../stubs/vscode';

const extension = Uri.file('/ext') as unknown as vscode.Uri;
const webview = {
  cspSource: 'vscode-webview://abc',
  asWebviewUri: (uri: Uri) => `https://file+.vscode-resource${uri.path}`,
} as unknown as vscode.Webview;

test('the page allows nothing but its own bundle and one nonce-tagged script', () => {
  const value = nonce();
  const html = dashboardHtml(webview, extension, value);
  const csp = /Content-Security-Policy" content="([^"]+)"/.exec(html)?.[1] ?? '';
  assert.match(csp, /^default-src 'none'; /);
  assert.match(csp, new RegExp(`script-src 'nonce-${value}'`));
  assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|https?:/);
  assert.match(html, new RegExp(`<script nonce="${value}" src="https://file\\+\\.vscode-resource/ext/dist/webview/app\\.js">`));
  assert.match(html, /href="https:\/\/file\+\.vscode-resource\/ext\/dist\/webview\/app\.css"/);
});

test('nonces are fresh and unguessable', () => {
  const values = new Set(Array.from({ length: 100 }, nonce));
  assert.equal(values.size, 100);
  for (const value of values) assert.match(value, /^[A-Za-z0-9_-]{24}$/);
});

test('the webview may load only the built bundle, runs scripts and is not kept alive hidden', () => {
  const options = webviewOptions(extension);
  assert.deepEqual(options.localResourceRoots?.map((u) => (u as unknown as Uri).path), ['/ext/dist/webview']);
  assert.equal(options.enableScripts, true);
  assert.equal((options as { retainContextWhenHidden?: boolean }).retainContextWhenHidden, undefined);
});
