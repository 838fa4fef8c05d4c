/** Registers the extension's parts; each lives in its own module under `host/`. */
import * as vscode from 'vscode';
import { DashboardPanel } from './host/dashboardPanel';
import { dirname } from 'node:path';
import { SessionWatcher, sessionsDir } from './host/discovery';
import { HubLauncher } from './host/hubLauncher';
import { SessionViewer } from './host/sessionViewer';
import { RunStore } from './host/runStore';
import { RunStatusBar, SHOW_COMMAND } from './host/statusBar';

const OPEN_FILE_COMMAND = 'onthefly.openSessionFile';
const OPEN_HUB_COMMAND = 'onthefly.openHub';

export function activate(context: vscode.ExtensionContext): void {
  const output = vscode.window.createOutputChannel('OnTheFly');
  const log = (text: string): void => output.appendLine(`[${new Date().toISOString()}] ${text}`);
  const store = new RunStore({ log });
  const config = (): vscode.WorkspaceConfiguration => vscode.workspace.getConfiguration('onthefly');
  const home = (): string => sessionsDir(config().get<string>('home'));
  const viewer = new SessionViewer({
    python: () => config().get<string>('python')?.trim() || 'python3',
    home: () => dirname(home()),
  });
  const hub = new HubLauncher({
    python: () => config().get<string>('python')?.trim() || 'python3',
    home: () => dirname(home()),
  });
  const openHub = async (): Promise<void> => {
    try {
      const url = await hub.address();
      log(`the hub serves every run at ${url.split('?')[0]}`);
      await vscode.env.openExternal(vscode.Uri.parse(url));
    } catch (err) {
      void vscode.window.showErrorMessage(`OnTheFly: cannot start the hub: ${(err as Error).message}`);
    }
  };
  const openFile = async (uri?: vscode.Uri): Promise<void> => {
    const file =
      uri?.fsPath ??
      (await vscode.window.showOpenDialog({ filters: { 'OnTheFly session': ['otf'] }, title: 'Open Session File' }))?.[0]?.fsPath;
    if (!file) return;
    try {
      const viewing = await viewer.open(file);
      log(`viewing ${file} read-only (process ${viewing.pid}, port ${viewing.port})`);
      watcher.scan();
      DashboardPanel.createOrShow(context.extensionUri, store);
    } catch (err) {
      void vscode.window.showErrorMessage(`OnTheFly: cannot open ${file}: ${(err as Error).message}`);
    }
  };
  const watcher = new SessionWatcher(home, {
    added: (session) => store.addSession(session),
    removed: (key) => store.endSession(key),
    problem: log,
  });
  context.subscriptions.push(
    output,
    store,
    watcher,
    new RunStatusBar(store),
    viewer,
    hub,
    vscode.commands.registerCommand(OPEN_FILE_COMMAND, openFile),
    vscode.commands.registerCommand(OPEN_HUB_COMMAND, openHub),
    vscode.commands.registerCommand(SHOW_COMMAND, () =>
      DashboardPanel.createOrShow(context.extensionUri, store),
    ),
    vscode.window.registerWebviewPanelSerializer(DashboardPanel.viewType, {
      deserializeWebviewPanel: async (panel) => {
        DashboardPanel.revive(panel, context.extensionUri, store);
      },
    }),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration('onthefly.home')) watcher.restart();
    }),
  );
}

export function deactivate(): void {
  // Everything is disposed through context.subscriptions.
}
