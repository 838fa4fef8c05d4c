/** The few `vscode` APIs the host modules use, for tests outside VS Code. */

export class Uri {
  private constructor(readonly path: string) {}
  static file(path: string): Uri {
    return new Uri(path);
  }
  static joinPath(base: Uri, ...parts: string[]): Uri {
    return new Uri([base.path, ...parts].join('/'));
  }
  toString(): string {
    return `file://${this.path}`;
  }
}

export const ViewColumn = { One: 1 };
export const StatusBarAlignment = { Left: 1, Right: 2 };
export const window = {};
export const workspace = {};
export class ThemeColor {
  constructor(readonly id: string) {}
}
