// Writes a Windows minidump of another process with dbghelp!MiniDumpWriteDump (run under Wine by
// sample_dumps/make_dumps.py; it must have the bitness of the process it dumps).
//   usage: minidumper PID OUT.dmp [TYPE]      TYPE defaults to 2 (MiniDumpWithFullMemory)
//
// A process dumping itself gets a dump three times larger and no context for the calling thread, hence a
// second process.  Wine ignores smaller dump types (no GC heap in them).
using System;
using System.IO;
using System.Runtime.InteropServices;

static class Program
{
    const uint PROCESS_QUERY_INFORMATION = 0x0400, PROCESS_VM_READ = 0x0010, PROCESS_DUP_HANDLE = 0x0040;

    [DllImport("kernel32.dll", SetLastError = true)]
    static extern IntPtr OpenProcess(uint access, bool inherit, uint pid);

    [DllImport("kernel32.dll", SetLastError = true)]
    static extern bool CloseHandle(IntPtr handle);

    [DllImport("dbghelp.dll", SetLastError = true)]
    static extern bool MiniDumpWriteDump(IntPtr process, uint pid, IntPtr file, uint type,
                                         IntPtr exceptionParam, IntPtr userStreamParam, IntPtr callbackParam);

    static int Main(string[] args)
    {
        uint pid = uint.Parse(args[0]);
        uint type = args.Length > 2 ? uint.Parse(args[2]) : 2;
        IntPtr process = OpenProcess(PROCESS_QUERY_INFORMATION | PROCESS_VM_READ | PROCESS_DUP_HANDLE, false, pid);
        if (process == IntPtr.Zero)
        {
            Console.Error.WriteLine("OpenProcess failed: " + Marshal.GetLastWin32Error());
            return 1;
        }
        using (var stream = new FileStream(args[1], FileMode.Create, FileAccess.ReadWrite))
        {
            bool ok = MiniDumpWriteDump(process, pid, stream.SafeFileHandle.DangerousGetHandle(), type,
                                        IntPtr.Zero, IntPtr.Zero, IntPtr.Zero);
            if (!ok)
            {
                Console.Error.WriteLine("MiniDumpWriteDump failed: " + Marshal.GetLastWin32Error());
                return 1;
            }
        }
        CloseHandle(process);
        Console.WriteLine("written " + args[1]);
        return 0;
    }
}
