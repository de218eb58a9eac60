// The types target: allocates instances of BCL types, of classes and structs of its own (padding,
// embedded structs, explicit layout, inheritance, generics) and of classes it defines at run time with
// System.Reflection.Emit, then writes what reflection says of each (address, MethodTable, type name, every
// instance field with its declaring type, declared type, token and value, array elements) to a JSON
// "truth" file, prints "READY <pid>" and waits on stdin while it is dumped.
//
//   mcs -unsafe -target:exe -out:types.dll Program.cs ../common/TargetRuntime.cs
//
// Values are written so that a test can compare them exactly: integers in decimal, bool true/false, char
// as U+XXXX, floats as the hex of their bits, references as the address of the object (or null),
// pointers in hex, value types as their own fields.

using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Globalization;
using System.IO;
using System.Reflection;
using System.Reflection.Emit;
using System.Runtime.InteropServices;
using System.Text;

public struct Inner { public short S; public int I; public byte B; }

public class Padded { public byte A; public long L; public byte C; public object O; public string Name; }

public class Derived : Padded { public int Extra; public bool Flag; }

public class WithStructs { public Inner First; public byte Tail; public DateTime When; public Guid Id; public decimal Money; public Inner Second; }

[StructLayout(LayoutKind.Explicit)]
public class Explicit { [FieldOffset(0)] public int Low; [FieldOffset(4)] public int High; [FieldOffset(0)] public long Both; [FieldOffset(8)] public double D; }

public enum Colour : short { Red = 1, Green = -2 }

// Fields of generic value types that no object on the heap shows (a Nullable<T> boxes as its T): their
// MethodTables are found where the runtime loaded them.
public class WithGenericStructs
{
    public int? Maybe; public DateTime? Never; public byte Tail; public KeyValuePair<int, string> Pair;
    public Inner? MaybeInner; public KeyValuePair<long, byte> Small;
}

public class Generic<T> { public T Value; public int Count; public Colour Tint; }

public class Primitives
{
    public bool Bo; public char Ch; public sbyte I1; public byte U1; public short I2; public ushort U2; public int I4;
    public uint U4; public long I8; public ulong U8; public float R4; public double R8; public IntPtr Ptr; public UIntPtr UPtr;
}

static class Program
{
    static readonly List<object> Keep = new List<object>();
    const int MaxElements = 16;

    static unsafe long AddressOf(object o)
    {
        TypedReference tr = __makeref(o);
        return (long)**(IntPtr**)(&tr);
    }

    // The MethodTable pointer the object itself holds (an array's TypeHandle is a TypeDesc on 3.1).
    static long MethodTableOf(object o) { return Marshal.ReadIntPtr(new IntPtr(AddressOf(o))).ToInt64(); }

    static string Hex(long v) { return "0x" + v.ToString("x", CultureInfo.InvariantCulture); }

    static string Quote(string s)
    {
        var b = new StringBuilder("\"");
        foreach (char c in s)
        {
            if (c == '"' || c == '\\') b.Append('\\').Append(c);
            else if (c < 0x20 || c > 0x7e) b.Append("\\u").Append(((int)c).ToString("x4"));
            else b.Append(c);
        }
        return b.Append('"').ToString();
    }

    // A value as the truth file holds it (a JSON value).
    static string Value(object v, Type t)
    {
        if (t.IsPointer) return "\"?\"";
        if (!t.IsValueType) return v == null ? "null" : Quote(Hex(AddressOf(v)));
        if (t.IsEnum) { t = Enum.GetUnderlyingType(t); v = Convert.ChangeType(v, t, CultureInfo.InvariantCulture); }
        if (t == typeof(bool)) return (bool)v ? "\"true\"" : "\"false\"";
        if (t == typeof(char)) return Quote("U+" + ((int)(char)v).ToString("X4"));
        if (t == typeof(float)) return Quote("bits:" + BitConverter.ToInt32(BitConverter.GetBytes((float)v), 0).ToString("x8"));
        if (t == typeof(double)) return Quote("bits:" + BitConverter.DoubleToInt64Bits((double)v).ToString("x16"));
        if (t == typeof(IntPtr)) return Quote(Hex(((IntPtr)v).ToInt64()));
        if (t == typeof(UIntPtr)) return Quote(Hex((long)((UIntPtr)v).ToUInt64()));
        if (t.IsPrimitive) return Quote(Convert.ToString(v, CultureInfo.InvariantCulture));
        if (t.IsGenericType && t.GetGenericTypeDefinition() == typeof(Nullable<>)) return NullableFields(v, t);
        return Fields(v, t);  // a struct: its own fields
    }

    // A Nullable<T> boxes as its T, or as null: its two fields (hasValue, value) as the struct holds them.
    static string NullableFields(object v, Type t)
    {
        Type u = Nullable.GetUnderlyingType(t);
        var parts = new List<string>();
        foreach (FieldInfo f in t.GetFields(BindingFlags.Instance | BindingFlags.Public | BindingFlags.NonPublic | BindingFlags.DeclaredOnly))
        {
            string value = f.FieldType == typeof(bool) ? Value(v != null, typeof(bool)) : Value(v ?? Activator.CreateInstance(u), u);
            parts.Add(string.Format("{{\"name\": {0}, \"token\": {1}, \"declaring_type\": {2}, \"type\": {3}, \"value\": {4}}}",
                Quote(f.Name), f.MetadataToken, Quote(t.ToString()), Quote(f.FieldType.ToString()), value));
        }
        return "{\"fields\": [" + string.Join(", ", parts.ToArray()) + "]}";
    }

    static string Fields(object o, Type type)
    {
        var parts = new List<string>();
        var chain = new List<Type>();
        for (Type t = type; t != null; t = t.BaseType) chain.Insert(0, t);
        foreach (Type t in chain)
        {
            foreach (FieldInfo f in t.GetFields(BindingFlags.Instance | BindingFlags.Public | BindingFlags.NonPublic | BindingFlags.DeclaredOnly))
            {
                string value;
                try { value = Value(f.GetValue(o), f.FieldType); } catch (Exception) { value = "\"?\""; }
                parts.Add(string.Format("{{\"name\": {0}, \"token\": {1}, \"declaring_type\": {2}, \"type\": {3}, \"value\": {4}}}",
                    Quote(f.Name), f.MetadataToken, Quote(t.ToString()), Quote(f.FieldType.ToString()), value));
            }
        }
        return "{\"fields\": [" + string.Join(", ", parts.ToArray()) + "]}";
    }

    static string Describe(string name, object o)
    {
        Type t = o.GetType();
        var b = new StringBuilder();
        b.AppendFormat("{{\"name\": {0}, \"address\": {1}, \"method_table\": {2}, \"type\": {3}",
            Quote(name), Quote(Hex(AddressOf(o))), Quote(Hex(MethodTableOf(o))), Quote(t.ToString()));
        Array a = o as Array;
        if (a != null)
        {
            b.AppendFormat(", \"length\": {0}, \"rank\": {1}, \"elements\": [", a.Length, a.Rank);
            int i = 0;
            foreach (object e in a)
            {
                if (i == MaxElements) break;
                if (i++ > 0) b.Append(", ");
                b.Append(Value(e, t.GetElementType()));
            }
            b.Append("]");
        }
        else
        {
            string fields = Fields(o, t);
            b.Append(", ").Append(fields.Substring(1, fields.Length - 2));
        }
        return b.Append("}").ToString();
    }

    static Type Emit(ModuleBuilder module, string name, Type parent, TypeAttributes extra, params object[] fields)
    {
        TypeBuilder tb = module.DefineType(name, TypeAttributes.Public | TypeAttributes.Class | extra, parent);
        for (int i = 0; i < fields.Length; i += 2)
        {
            FieldBuilder fb = tb.DefineField((string)fields[i], (Type)fields[i + 1], FieldAttributes.Public);
            if ((extra & TypeAttributes.ExplicitLayout) != 0) fb.SetOffset(i * 2);
        }
        return tb.CreateTypeInfo().AsType();
    }

    static object Fill(Type t, int seed)
    {
        object o = Activator.CreateInstance(t);
        foreach (FieldInfo f in t.GetFields())
        {
            Type ft = f.FieldType;
            if (ft == typeof(string)) f.SetValue(o, "emitted-" + seed);
            else if (ft == typeof(object)) f.SetValue(o, new Version(seed, 1));
            else if (ft == typeof(bool)) f.SetValue(o, true);
            else if (ft == typeof(char)) f.SetValue(o, (char)('A' + seed));
            else if (ft == typeof(Inner)) { var v = new Inner(); v.S = (short)-seed; v.I = seed * 1000; v.B = 7; f.SetValue(o, v); }
            else if (ft.IsPrimitive) f.SetValue(o, Convert.ChangeType((seed * 7 + f.Name.Length) % 100, ft, CultureInfo.InvariantCulture));
            seed++;
        }
        return o;
    }

    static object[] Objects()
    {
        var list = new List<object>();
        var d = new Dictionary<string, int>(); d["alpha"] = 1; d["beta"] = -2;
        var p = new Padded(); p.A = 0xAB; p.L = -1234567890123L; p.C = 0xCD; p.O = new object(); p.Name = "padded";
        var dv = new Derived(); dv.A = 1; dv.L = 2; dv.C = 3; dv.Extra = -4; dv.Flag = true; dv.Name = "derived";
        var ws = new WithStructs(); ws.First.S = -5; ws.First.I = 6; ws.First.B = 7; ws.Tail = 8;
        ws.When = new DateTime(2026, 11, 23, 7, 0, 0, DateTimeKind.Utc); ws.Id = new Guid("00112233-4455-6677-8899-aabbccddeeff");
        ws.Money = 12345.6789m; ws.Second.S = 9; ws.Second.I = -10; ws.Second.B = 11;
        var ex = new Explicit(); ex.Both = 0x1122334455667788L; ex.D = Math.PI;
        var g1 = new Generic<string>(); g1.Value = "generic"; g1.Count = 3; g1.Tint = Colour.Green;
        var g2 = new Generic<long>(); g2.Value = long.MinValue; g2.Count = -3; g2.Tint = Colour.Red;
        var g3 = new Generic<Inner>(); g3.Value.S = 12; g3.Value.I = 13; g3.Value.B = 14; g3.Count = 15;
        var gs = new WithGenericStructs(); gs.Maybe = -77; gs.Tail = 0x5A; gs.Pair = new KeyValuePair<int, string>(99, "pair");
        gs.MaybeInner = new Inner { S = 3, I = 4, B = 5 }; gs.Small = new KeyValuePair<long, byte>(long.MinValue, 0xEE);
        var pr = new Primitives(); pr.Bo = true; pr.Ch = '\u00e9'; pr.I1 = -8; pr.U1 = 200; pr.I2 = -16000; pr.U2 = 60000;
        pr.I4 = int.MinValue; pr.U4 = uint.MaxValue; pr.I8 = long.MaxValue; pr.U8 = ulong.MaxValue; pr.R4 = 1.5e-7f;
        pr.R8 = -2.25e300; pr.Ptr = new IntPtr(0x12345678); pr.UPtr = new UIntPtr(0x87654321u);
        list.AddRange(new object[] {
            new Version(1, 2, 3, 4), new List<int>(new[] { 1, 2, 3 }), d, new Exception("boom"),
            Tuple.Create(7, "seven"), new KeyValuePair<string, int>("kv", 42), new DateTime(2000, 1, 2, 3, 4, 5),
            new Guid("deadbeef-0000-1111-2222-333344445555"), 79228162514264337593543950335m, (object)Colour.Green,
            p, dv, ws, ex, g1, g2, g3, pr, gs,
            new[] { true, false, true }, "chars".ToCharArray(), new sbyte[] { -1, 2 }, new byte[] { 1, 2, 255 },
            new short[] { -3, 4 }, new ushort[] { 5, 65535 }, new[] { -6, 7, int.MaxValue }, new uint[] { 8, 9 },
            new[] { -10L, 11L }, new ulong[] { 12, ulong.MaxValue }, new[] { 1.25f, -0f }, new[] { double.Epsilon, 3.5 },
            new[] { new[] { 1, 2 }, new[] { 3 } }, new[,] { { 1, 2, 3 }, { 4, 5, 6 } }, new[] { "x", null, "z" },
            new[] { new KeyValuePair<string, int>("a", 1), new KeyValuePair<string, int>("b", 2) },
            new[] { ws.First, ws.Second }, new object[] { 1, "two", null },
        });
        // Types defined at run time: names the dump's images cannot give, fields every layout must place.
        var asm = AssemblyBuilder.DefineDynamicAssembly(new AssemblyName("Emitted"), AssemblyBuilderAccess.Run);
        ModuleBuilder module = asm.DefineDynamicModule("Emitted");
        Type prims = Emit(module, "Emitted.Prims", typeof(object), 0, "b", typeof(byte), "l", typeof(long), "c", typeof(char),
            "s", typeof(string), "f", typeof(float), "o", typeof(object), "h", typeof(short), "z", typeof(bool), "d", typeof(double));
        Type nested = Emit(module, "Emitted.WithInner", typeof(Padded), 0, "inner", typeof(Inner), "after", typeof(byte), "x", typeof(int));
        Type expl = Emit(module, "Emitted.Explicit", typeof(object), TypeAttributes.ExplicitLayout, "a", typeof(int), "b", typeof(int), "c", typeof(int));
        list.Add(Fill(prims, 1));
        list.Add(Fill(nested, 20));
        list.Add(Fill(expl, 40));
        return list.ToArray();
    }

    internal static void Main(string[] args)
    {
        string truthPath = args.Length > 0 ? args[0] : "truth.json";
        object[] objects = Objects();
        Keep.AddRange(objects);
        // Everything survives two full collections: in gen2, it does not move while the truth is written.
        GC.Collect(); GC.WaitForPendingFinalizers(); GC.Collect();
        var lines = new List<string>();
        for (int i = 0; i < objects.Length; i++) lines.Add("    " + Describe("object" + i, objects[i]));
        var truth = new StreamWriter(truthPath, false, new UTF8Encoding(false));
        truth.Write("{\n");
        truth.Write("  \"runtime_version\": \"{0}\",\n", TargetRuntime.Version());
        truth.Write("  \"pid\": {0},\n", Process.GetCurrentProcess().Id);
        truth.Write("  \"pointer_size\": {0},\n", IntPtr.Size);
        truth.Write("  \"objects\": [\n");
        truth.Write(string.Join(",\n", lines.ToArray()));
        truth.Write("\n  ]\n}\n");
        truth.Close();
        Console.WriteLine("READY " + Process.GetCurrentProcess().Id);
        Console.ReadLine();
        GC.KeepAlive(Keep);
    }
}
