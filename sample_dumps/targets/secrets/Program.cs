// The secrets target of clrlayout's tests (trim --redact): it makes secrets at run time (never literals of
// this code, which stay in the assembly), holds them on the heap as strings (ASCII and not), byte and char
// arrays, primitive fields and a boxed value, copies them to native memory and to its stack, writes each as the
// bytes to look for to the truth file, says READY and waits (its stack copies stay in the waiting frame).
using System;
using System.Diagnostics;
using System.IO;
using System.Runtime.InteropServices;
using System.Text;

class Vault
{
    public long Pin;
    public double Balance;
    public int Code;
    public string Owner;
}

static class Program
{
    static string[] Strings;
    static byte[] Key;
    static char[] Password;
    static Vault Held;
    static object Boxed;
    static IntPtr[] Native;

    static string Hex(byte[] b)
    {
        var s = new StringBuilder();
        foreach (byte x in b) s.Append(x.ToString("x2"));
        return s.ToString();
    }

    static string Random(Random rng, string alphabet, int n)
    {
        var s = new StringBuilder();
        for (int i = 0; i < n; i++) s.Append(alphabet[rng.Next(alphabet.Length)]);
        return s.ToString();
    }

    static unsafe int Main(string[] args)
    {
        string truthPath = args.Length > 0 ? args[0] : "truth.json";
        var rng = new Random(Process.GetCurrentProcess().Id * 7919 + Environment.TickCount);
        string ascii = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        string other = "паролиключсекрет秘密鍵암호비밀ñéüß";
        Strings = new string[] {
            "sk_live_" + Random(rng, ascii, 24),
            "Server=db;Password=" + Random(rng, ascii, 16),
            Random(rng, other, 12) + Random(rng, ascii, 4),
        };
        Key = new byte[32];
        rng.NextBytes(Key);
        Password = ("pw-" + Random(rng, ascii, 20)).ToCharArray();
        Held = new Vault { Pin = ((long)rng.Next() << 32) | (uint)rng.Next(), Balance = rng.NextDouble() * 1e9,
                           Code = rng.Next(1 << 24, int.MaxValue), Owner = "owner-" + Random(rng, ascii, 12) };
        Boxed = ((long)rng.Next() << 32) | (uint)rng.Next();

        // copies in native memory: UTF-16 and UTF-8 (as a C library would hold them), and the key's bytes
        Native = new IntPtr[Strings.Length * 2 + 1];
        for (int i = 0; i < Strings.Length; i++)
        {
            Native[2 * i] = Marshal.StringToHGlobalUni(Strings[i]);
            byte[] utf8 = Encoding.UTF8.GetBytes(Strings[i]);
            Native[2 * i + 1] = Marshal.AllocHGlobal(utf8.Length + 1);
            Marshal.Copy(utf8, 0, Native[2 * i + 1], utf8.Length);
        }
        Native[Native.Length - 1] = Marshal.AllocHGlobal(Key.Length);
        Marshal.Copy(Key, 0, Native[Native.Length - 1], Key.Length);

        // copies on this frame's stack, alive while it waits below
        string onStack = Strings[1];
        char* chars = stackalloc char[onStack.Length];
        for (int i = 0; i < onStack.Length; i++) chars[i] = onStack[i];
        byte* bytes = stackalloc byte[Key.Length];
        for (int i = 0; i < Key.Length; i++) bytes[i] = Key[i];

        var secrets = new System.Collections.Generic.List<string>();
        foreach (string s in Strings)
        {
            secrets.Add(Hex(Encoding.Unicode.GetBytes(s)));
            secrets.Add(Hex(Encoding.UTF8.GetBytes(s)));
        }
        secrets.Add(Hex(Key));
        secrets.Add(Hex(Encoding.Unicode.GetBytes(Password)));
        secrets.Add(Hex(Encoding.Unicode.GetBytes(Held.Owner)));
        secrets.Add(Hex(BitConverter.GetBytes(Held.Pin)));
        secrets.Add(Hex(BitConverter.GetBytes(Held.Balance)));
        secrets.Add(Hex(BitConverter.GetBytes((long)Boxed)));
        var truth = new StreamWriter(truthPath, false, new UTF8Encoding(false));
        truth.Write("{\n  \"runtime_version\": \"" + TargetRuntime.Version() + "\",\n");
        truth.Write("  \"pid\": " + Process.GetCurrentProcess().Id + ",\n");
        truth.Write("  \"on_stack\": [\"" + Hex(Encoding.Unicode.GetBytes(onStack)) + "\", \"" + Hex(Key) + "\"],\n");
        truth.Write("  \"secrets\": [\"" + string.Join("\", \"", secrets.ToArray()) + "\"]\n}\n");
        truth.Close();
        Console.WriteLine("READY " + Process.GetCurrentProcess().Id);
        Console.ReadLine();
        int sum = 0;  // the stack copies are read after the wait: the compiler keeps them
        for (int i = 0; i < onStack.Length; i++) sum += chars[i];
        for (int i = 0; i < Key.Length; i++) sum += bytes[i];
        GC.KeepAlive(Native);
        return sum == -1 ? 1 : 0;
    }
}
