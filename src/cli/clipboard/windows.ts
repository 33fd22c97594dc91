/**
 * Windows through Windows PowerShell (powershell.exe, part of Windows).
 * clip.exe is not used: it can neither read the clipboard back (the clear
 * checks what it holds) nor mark a copy. The copy is a DataObject with the
 * text and the formats Windows defines for password managers:
 * ExcludeClipboardContentFromMonitorProcessing, and CanIncludeInClipboardHistory
 * and CanUploadToCloudClipboard set to 0, so clipboard history and cloud sync
 * skip it. The scripts are fixed text (-EncodedCommand); the value comes on
 * stdin as UTF-8. Not run on this project's CI (no Windows).
 */
import { check, readResult, runTool, type ClipboardTool } from './tool.js';

const prelude =
  '$ErrorActionPreference = "Stop"; Add-Type -AssemblyName System.Windows.Forms; ' +
  '[Console]::InputEncoding = [Text.Encoding]::UTF8; [Console]::OutputEncoding = New-Object Text.UTF8Encoding $false; ';

const COPY =
  `${prelude}$text = [Console]::In.ReadToEnd(); $data = New-Object System.Windows.Forms.DataObject; ` +
  '$data.SetData([System.Windows.Forms.DataFormats]::UnicodeText, $text); ' +
  '$zero = [BitConverter]::GetBytes([int32]0); ' +
  '$data.SetData("ExcludeClipboardContentFromMonitorProcessing", (New-Object IO.MemoryStream (,$zero))); ' +
  '$data.SetData("CanIncludeInClipboardHistory", (New-Object IO.MemoryStream (,$zero))); ' +
  '$data.SetData("CanUploadToCloudClipboard", (New-Object IO.MemoryStream (,$zero))); ' +
  '[System.Windows.Forms.Clipboard]::SetDataObject($data, $true)';
const READ = `${prelude}$t = [System.Windows.Forms.Clipboard]::GetText(); if ($t) { [Console]::Out.Write($t) }`;
const CLEAR = `${prelude}[System.Windows.Forms.Clipboard]::Clear()`;

/** powershell.exe arguments for a script: -STA, which the clipboard API needs. */
function args(script: string): string[] {
  return [
    '-NoProfile',
    '-NonInteractive',
    '-STA',
    '-EncodedCommand',
    Buffer.from(script, 'utf16le').toString('base64'),
  ];
}

export const windows: ClipboardTool = {
  name: 'powershell',
  programs: ['powershell.exe'],
  install: 'Windows PowerShell (powershell.exe) is part of Windows; check PATH',
  async copy(value) {
    check(await runTool('powershell.exe', args(COPY), { input: value, timeoutMs: 15_000 }), 'powershell.exe');
    return true;
  },
  async read(limit) {
    return readResult(await runTool('powershell.exe', args(READ), { capture: limit, timeoutMs: 15_000 }));
  },
  async clear() {
    check(await runTool('powershell.exe', args(CLEAR), { timeoutMs: 15_000 }), 'powershell.exe');
  },
};
