/**
 * The dashboard webview panel: at most one, revived after a reload. The page is the same
 * bundle the session server serves to browsers; here it talks to the host by messages: it
 * says `ready` whenever it (re)loads, gets the whole state, then every change. The panel is
 * not kept alive while hidden: on show the page reloads and asks again.
 */
import { randomBytes } from 'node:crypto';
import * as vscode from 'vscode';
import type { HostToView, PathPurpose, ViewToHost } from '../common/messages';
import { Disposable, toDisposable } from './disposable';
import type { RunStore } from './runStore';

/** Where the built page lives inside the extension; the only folder the webview may load. */
export const BUNDLE_DIR = ['dist', 'webview'];

export class DashboardPanel extends Disposable {
  static readonly viewType = 'onthefly.dashboard';
  private static current: DashboardPanel | undefined;

  private ready = false;

  /** Show the dashboard, creating it if needed. */
  static createOrShow(extensionUri: vscode.Uri, store: RunStore): DashboardPanel {
    const column = vscode.window.activeTextEditor?.viewColumn;
    if (DashboardPanel.current) {
      DashboardPanel.current.panel.reveal(column);
      return DashboardPanel.current;
    }
    const panel = vscode.window.createWebviewPanel(
      DashboardPanel.viewType,
      'OnTheFly',
      column ?? vscode.ViewColumn.One,
      webviewOptions(extensionUri),
    );
    return new DashboardPanel(panel, extensionUri, store);
  }

  /** Adopt a panel VS Code restored after a reload. */
  static revive(panel: vscode.WebviewPanel, extensionUri: vscode.Uri, store: RunStore): DashboardPanel {
    DashboardPanel.current?.dispose();
    return new DashboardPanel(panel, extensionUri, store);
  }

  private constructor(
    private readonly panel: vscode.WebviewPanel,
    extensionUri: vscode.Uri,
    private readonly store: RunStore,
  ) {
    super();
    DashboardPanel.current = this;
    this.register(toDisposable(() => (DashboardPanel.current = undefined)));
    panel.webview.options = webviewOptions(extensionUri);
    panel.webview.html = dashboardHtml(panel.webview, extensionUri, nonce());
    this.register(panel.onDidDispose(() => this.dispose()));
    this.register(
      panel.onDidChangeViewState(() => {
        // A hidden webview is destroyed; the page says `ready` again when shown.
        if (!panel.visible) this.ready = false;
      }),
    );
    this.register(panel.webview.onDidReceiveMessage((message: ViewToHost) => this.receive(message)));
    this.register(store.subscribe((message) => this.ready && this.post(message)));
    this.register(panel);
  }

  private receive(message: ViewToHost): void {
    switch (message.type) {
      case 'ready':
        this.ready = true;
        this.post({ type: 'state', state: this.store.state });
        return;
      case 'command':
        void this.store.request(message.source, message.command).then((outcome) => {
          this.post({ type: 'result', requestId: message.requestId, outcome });
        });
        return;
      case 'savePng':
        void savePng(message.name, message.dataUrl);
        return;
      case 'choosePath':
        void choosePath(message.purpose, message.suggested).then((path) => {
          this.post({ type: 'path', requestId: message.requestId, path });
        });
        return;
      default: {
        const unknown: never = message;
        console.warn(`OnTheFly: ignored a message from the dashboard: ${JSON.stringify(unknown)}`);
      }
    }
  }

  private post(message: HostToView): void {
    void this.panel.webview.postMessage(message);
  }
}

export function webviewOptions(extensionUri: vscode.Uri): vscode.WebviewOptions & vscode.WebviewPanelOptions {
  return {
    enableScripts: true,
    localResourceRoots: [vscode.Uri.joinPath(extensionUri, ...BUNDLE_DIR)],
  };
}

/** The page: the bundle's script and style, under a CSP that allows nothing else. */
export function dashboardHtml(webview: vscode.Webview, extensionUri: vscode.Uri, nonceValue: string): string {
  const asset = (name: string): string =>
    webview.asWebviewUri(vscode.Uri.joinPath(extensionUri, ...BUNDLE_DIR, name)).toString();
  const csp = [
    "default-src 'none'",
    `style-src ${webview.cspSource}`,
    `img-src ${webview.cspSource} data: blob:`,
    `script-src 'nonce-${nonceValue}'`,
  ].join('; ');
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${asset('app.css')}">
<title>OnTheFly</title>
</head>
<body>
<div id="app"></div>
<script nonce="${nonceValue}" src="${asset('app.js')}"></script>
</body>
</html>`;
}

export function nonce(): string {
  return randomBytes(18).toString('base64url');
}

async function savePng(name: string, dataUrl: string): Promise<void> {
  const prefix = 'data:image/png;base64,';
  if (!dataUrl.startsWith(prefix)) {
    void vscode.window.showErrorMessage('OnTheFly: the chart export is not a PNG image');
    return;
  }
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
  const target = await vscode.window.showSaveDialog({
    defaultUri: folder ? vscode.Uri.joinPath(folder, name) : undefined,
    filters: { 'PNG image': ['png'] },
  });
  if (!target) return;
  await vscode.workspace.fs.writeFile(target, Buffer.from(dataUrl.slice(prefix.length), 'base64'));
}

/**
 * A session file for an export (save dialog) or to load into a run (open dialog), or a
 * folder to export samples into (folder dialog).
 */
async function choosePath(purpose: PathPurpose, suggested: string): Promise<string | null> {
  const filters = { 'OnTheFly session': ['otf'] };
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
  if (purpose === 'folder') {
    const picked = await vscode.window.showOpenDialog({
      defaultUri: folder,
      canSelectFiles: false,
      canSelectFolders: true,
      canSelectMany: false,
      title: 'Export the selected samples into this folder',
      openLabel: 'Export here',
    });
    return picked?.[0]?.fsPath ?? null;
  }
  if (purpose === 'export') {
    const target = await vscode.window.showSaveDialog({
      defaultUri: folder ? vscode.Uri.joinPath(folder, suggested) : undefined,
      filters,
      title: 'Export Session',
    });
    return target?.fsPath ?? null;
  }
  const picked = await vscode.window.showOpenDialog({
    defaultUri: folder,
    filters,
    canSelectMany: false,
    title: 'Load Session into the paused run',
  });
  return picked?.[0]?.fsPath ?? null;
}
