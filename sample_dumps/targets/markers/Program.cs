// The markers target of clrlayout's tests (trim --redact, as an attacker checks it): it plants a distinct marker
// in every place of a process where a secret can sit and writes, for each, the bytes to look for to its truth file,
// says READY and waits; "crash" on its standard input makes it die of an unhandled exception (a runtime-written
// crash dump), anything else ends it.
//
// Markers made at run time (random, never literals of this code): strings in a field, an array, a struct array, a
// Dictionary's keys and values, statics and thread statics; byte[], char[], long[]; long, double, Guid, decimal and
// DateTime fields, boxed values; a large (LOH) array and a pinned (POH) one; objects moved by a compacting GC (their
// old copies past the heap's allocated end), a dead large array whose LOH space was compacted away, dead objects and
// free space; copies in native memory and on the stack.  The command line and the environment carry markers too
// (the test chooses them: truth names them "argv" and "environment").
//
// Markers that are literals of this code (the test reads them from this file, by the comments "marker:"): a const
// string (metadata's Constant table, in #Blob), a parameter's default value (#Blob), custom attribute arguments on a
// type and on the assembly (#Blob), a string literal (#US, and on .NET 8+ a frozen-segment string), a long
// immediate (IL's ldc.i8), an array initializer (field RVA data in .text).
#pragma warning disable 0219, 0414
using System;
using System.Collections.Generic;
using System.ComponentModel;
using System.Diagnostics;
using System.IO;
using System.Reflection;
using System.Runtime;
using System.Runtime.InteropServices;
using System.Text;

[assembly: AssemblyDescription("mk6PhcDqnYyKEtCxSwV5OEGAgeMVa0Hf")]  // marker: attr_asm

struct Entry
{
    public long Id;
    public string Name;
}

class Vault
{
    public long Pin;
    public double Balance;
    public Guid Key;
    public decimal Amount;
    public DateTime When;
    public string Owner;
    public byte[] Blob;
}

[Description("mkrCJPisin1gahp2vGleN6GgPQZPwAQf")]  // marker: attr_type
static class Literals
{
    public const string Const = "mkycF11ZSyil90MSIQXdboDTi3Qt3QwS";  // marker: const (never used: only in #Blob)

    public static string Connect(string password = "mkEClqLBZObtikrHVtN6kqKaHY3Lwm3F")  // marker: default
    {
        return password.Length.ToString();
    }

    public static long Immediate()
    {
        return 0x7d1cfeb473ce5094L;  // marker: il_ldc
    }

    // marker: field_rva
    public static readonly byte[] Initial = new byte[] { 0x6c, 0xf5, 0xd1, 0x53, 0xc0, 0xec, 0xc6, 0x2f, 0x77, 0xcf,
        0x02, 0xaf, 0x80, 0xd0, 0x69, 0xd7, 0x38, 0xae, 0xa0, 0x2f, 0x12, 0xb0, 0xa9, 0x5f, 0xfa, 0x55, 0xea, 0xad,
        0x2c, 0x91, 0x58, 0xfc };

    public static string Literal = "mkO0f01xedHGrr3uhoYakhFjjGxeSH7k";  // marker: literal
}

static class Program
{
    static Random Rng;
    static StringBuilder Truth = new StringBuilder();
    static readonly string Alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

    // what stays alive
    static Vault Held;
    static Vault Young;
    static string[] StringArray;
    static char[] Chars;
    static long[] Longs;
    static Entry[] Entries;
    static object BoxedLong;
    static object BoxedGuid;
    static Dictionary<string, long> Cache;
    static byte[] LargeLive;
    static object PinnedArray;
    static IntPtr[] Native;
    static long StaticPin;
    static Guid StaticGuid;
    static string StaticName;
    [ThreadStatic] static long ThreadPin;
    [ThreadStatic] static string ThreadName;

    static string Hex(byte[] b)
    {
        var s = new StringBuilder();
        foreach (byte x in b) s.Append(x.ToString("x2"));
        return s.ToString();
    }

    static void Record(string name, string where, params byte[][] forms)
    {
        Truth.Append(Truth.Length == 0 ? "" : ",\n");
        Truth.Append("    \"" + name + "\": {\"where\": \"" + where + "\", \"forms\": [");
        for (int i = 0; i < forms.Length; i++)
            Truth.Append((i == 0 ? "\"" : ", \"") + Hex(forms[i]) + "\"");
        Truth.Append("]}");
    }

    static string Text(string name, string where)
    {
        var s = new StringBuilder("mk");
        for (int i = 0; i < 30; i++) s.Append(Alphabet[Rng.Next(Alphabet.Length)]);
        string text = s.ToString();
        Record(name, where, Encoding.Unicode.GetBytes(text), Encoding.UTF8.GetBytes(text));
        return text;
    }

    static byte[] Bytes(int n)
    {
        var b = new byte[n];
        for (int i = 0; i < n; i++) b[i] = (byte)Rng.Next(1, 256);  // no zero byte: every window is distinct
        return b;
    }

    static long Long(string name, string where)
    {
        long v = BitConverter.ToInt64(Bytes(8), 0);
        Record(name, where, BitConverter.GetBytes(v));
        return v;
    }

    static double Double(string name, string where)
    {
        long bits = (BitConverter.ToInt64(Bytes(8), 0) & 0x000FFFFFFFFFFFFFL) | 0x4130000000000000L;
        Record(name, where, BitConverter.GetBytes(bits));
        return BitConverter.Int64BitsToDouble(bits);
    }

    static Guid MakeGuid(string name, string where)
    {
        var g = new Guid(Bytes(16));
        Record(name, where, g.ToByteArray());
        return g;
    }

    static decimal Decimal(string name, string where)
    {
        byte[] b = Bytes(8);
        int lo = BitConverter.ToInt32(b, 0), mid = BitConverter.ToInt32(b, 4);
        Record(name, where, b);  // lo and mid, side by side in every runtime's decimal
        return new decimal(lo, mid, 0x1234, false, 3);
    }

    static DateTime Date(string name, string where)
    {
        long ticks = (BitConverter.ToInt64(Bytes(8), 0) & 0x7FFFFFFFFFFFFFFL) % 3155378975999999999L;
        var d = new DateTime(ticks, DateTimeKind.Utc);
        Record(name, where, BitConverter.GetBytes(ticks | 0x4000000000000000L));  // DateTime's _dateData
        return d;
    }

    static Vault MakeVault(string prefix)
    {
        return new Vault {
            Pin = Long(prefix + "_long", "heap"), Balance = Double(prefix + "_double", "heap"),
            Key = MakeGuid(prefix + "_guid", "heap"), Amount = Decimal(prefix + "_decimal", "heap"),
            When = Date(prefix + "_datetime", "heap"), Owner = Text(prefix + "_string", "heap"),
            Blob = Bytes(24)
        };
    }

    static void Garbage(List<object> into, int n)
    {
        for (int i = 0; i < n; i++) into.Add(new object[6]);
    }

    static unsafe int Main(string[] args)
    {
        string truthPath = "truth.json";  // the argument that names a .json file (after --password=..., say)
        foreach (string a in args)
            if (a.EndsWith(".json")) truthPath = a;
        Rng = new Random(Process.GetCurrentProcess().Id * 7919 + Environment.TickCount);

        // objects the compacting GC below moves: garbage first, then what lives, then the garbage dropped
        var garbage = new List<object>();
        Garbage(garbage, 20000);
        Held = MakeVault("moved");
        Record("moved_blob", "heap", Held.Blob);
        StringArray = new string[] { Text("string_array", "heap"), "x" };
        Chars = Text("char_array", "heap").ToCharArray();
        Longs = new long[] { 1, Long("long_array", "heap"), 2 };
        Entries = new Entry[] { new Entry { Id = Long("struct_array_long", "heap"), Name = Text("struct_array_string", "heap") } };
        BoxedLong = Long("boxed_long", "heap");
        BoxedGuid = MakeGuid("boxed_guid", "heap");
        Cache = new Dictionary<string, long>();
        Cache[Text("dictionary_key", "heap")] = Long("dictionary_value", "heap");
        StaticPin = Long("static_long", "statics");
        StaticGuid = MakeGuid("static_guid", "statics");
        StaticName = Text("static_string", "heap");
        ThreadPin = Long("thread_static_long", "statics");
        ThreadName = Text("thread_static_string", "heap");
        // a live large array, then a dead one at the LOH's end: the GC moves the LOH's end back over it, and its
        // first bytes lie just past the new end (the marker, repeated through its first 4 KB)
        LargeLive = new byte[100000];
        byte[] large = Bytes(16);
        Record("large_live", "heap", large);
        Array.Copy(large, 0, LargeLive, 60000, large.Length);
        char[] deadLarge = new char[150000];
        string deadText = Text("large_dead", "heap");
        for (int at = 0; at + deadText.Length < 2048; at += deadText.Length + 1)
            deadText.CopyTo(0, deadLarge, at, deadText.Length);
        MethodInfo allocate = typeof(GC).GetMethod("AllocateArray");  // .NET 5+: the pinned object heap
        if (allocate != null)
        {
            byte[] pinned = (byte[])allocate.MakeGenericMethod(typeof(byte)).Invoke(null, new object[] { 64, true });
            byte[] b = Bytes(16);
            Record("pinned_array", "heap", b);
            Array.Copy(b, 0, pinned, 8, b.Length);
            PinnedArray = pinned;
        }
        string dead = Text("dead_before_gc", "heap");
        dead = null;
        // small dead arrays at the end of generation 0, each with a marker: after the GC, what lies past the
        // allocated end of the heap's small-object part
        byte[] pastEnd = Bytes(16);
        Record("dead_small_arrays", "heap", pastEnd);
        for (int i = 0; i < 4000; i++)
        {
            byte[] b = new byte[48];
            Array.Copy(pastEnd, 0, b, 8 * (i % 4), pastEnd.Length);
            garbage.Add(b);
        }
        deadLarge = null;
        garbage = null;
        GCSettings.LargeObjectHeapCompactionMode = GCLargeObjectHeapCompactionMode.CompactOnce;
        GC.Collect(2, GCCollectionMode.Forced, true, true);
        GC.WaitForPendingFinalizers();

        // after the GC: young objects, dead ones, and the copies outside the heap
        Young = MakeVault("young");
        Record("young_blob", "heap", Young.Blob);
        string deadYoung = Text("dead_after_gc", "heap");
        deadYoung = null;
        int touched = Literals.Literal.Length + Literals.Initial.Length;  // the literal and the initializer, loaded
        string nativeText = Text("native_utf16", "native");
        string nativeUtf8 = Text("native_utf8", "native");
        byte[] nativeRaw = Bytes(16);
        Record("native_bytes", "native", nativeRaw);
        Native = new IntPtr[3];
        Native[0] = Marshal.StringToHGlobalUni(nativeText);
        byte[] utf8 = Encoding.UTF8.GetBytes(nativeUtf8);
        Native[1] = Marshal.AllocHGlobal(utf8.Length + 1);
        Marshal.Copy(utf8, 0, Native[1], utf8.Length);
        Native[2] = Marshal.AllocHGlobal(nativeRaw.Length);
        Marshal.Copy(nativeRaw, 0, Native[2], nativeRaw.Length);

        // copies on this frame's stack, alive while it waits below
        string stackText = Text("stack_chars", "stack");
        char* chars = stackalloc char[stackText.Length];
        for (int i = 0; i < stackText.Length; i++) chars[i] = stackText[i];
        byte[] stackRaw = Bytes(16);
        Record("stack_bytes", "stack", stackRaw);
        byte* bytes = stackalloc byte[stackRaw.Length];
        for (int i = 0; i < stackRaw.Length; i++) bytes[i] = stackRaw[i];

        var truth = new StreamWriter(truthPath, false, new UTF8Encoding(false));
        truth.Write("{\n  \"runtime_version\": \"" + TargetRuntime.Version() + "\",\n");
        truth.Write("  \"pid\": " + Process.GetCurrentProcess().Id + ",\n");
        truth.Write("  \"markers\": {\n" + Truth.ToString() + "\n  }\n}\n");
        truth.Close();
        Console.WriteLine("READY " + Process.GetCurrentProcess().Id);
        string line = Console.ReadLine();
        int sum = 0;  // the stack copies are read after the wait: the compiler keeps them
        for (int i = 0; i < stackText.Length; i++) sum += chars[i];
        for (int i = 0; i < stackRaw.Length; i++) sum += bytes[i];
        if (line == "crash")
            throw new InvalidOperationException("crash requested " + (sum + touched));
        GC.KeepAlive(Native);
        return sum == -1 ? 1 : 0;
    }
}
